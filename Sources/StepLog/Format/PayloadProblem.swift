/// Why a checksummed payload does not have its type's shape.
public struct PayloadProblem: Error, Hashable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
