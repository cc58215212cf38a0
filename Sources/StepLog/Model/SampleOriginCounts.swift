/// Live samples counted by the origin label of their current version
/// (`SampleOrigin`): kept by the store's state as versions come, are replaced
/// and are deleted, so the store knows them without reading its samples.
public struct SampleOriginCounts: Equatable, Sendable {
    public var unspecified = 0
    public var mock = 0
    public var export = 0
    public var live = 0

    public init() {}

    public subscript(origin: SampleOrigin) -> Int {
        get {
            switch origin {
            case .unspecified: unspecified
            case .mock: mock
            case .export: export
            case .live: live
            }
        }
        set { add(newValue - self[origin], code: Int(origin.rawValue)) }
    }

    /// Every live sample.
    public var total: Int { unspecified + mock + export + live }

    /// Adds `delta` to the count of the origin whose raw value is `code` (`IndexEntry.originCode`).
    @inline(__always)
    mutating func add(_ delta: Int, code: Int) {
        switch code {
        case 0: unspecified &+= delta
        case 1: mock &+= delta
        case 2: export &+= delta
        default: live &+= delta
        }
    }

    static func + (a: SampleOriginCounts, b: SampleOriginCounts) -> SampleOriginCounts {
        var sum = a
        sum.unspecified += b.unspecified
        sum.mock += b.mock
        sum.export += b.export
        sum.live += b.live
        return sum
    }
}

extension SampleOriginCounts: CustomStringConvertible {
    public var description: String {
        SampleOrigin.allCases.map { "\($0) \(self[$0])" }.joined(separator: ", ")
    }
}
