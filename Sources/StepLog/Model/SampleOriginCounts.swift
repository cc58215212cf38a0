/// Live samples counted by the origin label of their current version
/// (`SampleOrigin`): kept by the store's state as versions come, are replaced
/// and are deleted, so the store knows them without reading its samples.
public struct SampleOriginCounts: Equatable, Sendable {
    /// Indexed by `SampleOrigin.rawValue`.
    private var counts = SIMD4<Int>()

    public init() {}

    public subscript(origin: SampleOrigin) -> Int {
        get { counts[Int(origin.rawValue)] }
        set { counts[Int(origin.rawValue)] = newValue }
    }

    /// Every live sample.
    public var total: Int { counts.wrappedSum() }

    /// Adds `delta` to the count of the origin whose raw value is `code` (`IndexEntry.originCode`).
    @inline(__always)
    mutating func add(_ delta: Int, code: Int) { counts[code] &+= delta }

    static func + (a: SampleOriginCounts, b: SampleOriginCounts) -> SampleOriginCounts {
        var sum = a
        sum.counts &+= b.counts
        return sum
    }
}

extension SampleOriginCounts: CustomStringConvertible {
    public var description: String {
        SampleOrigin.allCases.map { "\($0) \(self[$0])" }.joined(separator: ", ")
    }
}
