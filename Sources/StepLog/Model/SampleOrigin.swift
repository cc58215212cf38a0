/// Where a sample came from, as the pipeline labels it. Stored in the sample
/// record's flag bits 2...3; raw values are the on-disk codes.
///
/// Not content: the server never sees it, and two versions that differ only
/// in origin are the same version. An upsert that changes only the origin
/// rewrites the record and keeps its synced state (a relabel).
public enum SampleOrigin: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case unspecified = 0
    case mock = 1
    case export = 2
    case live = 3

    public var description: String {
        switch self {
        case .unspecified: "unspecified"
        case .mock: "mock"
        case .export: "export"
        case .live: "live"
        }
    }
}
