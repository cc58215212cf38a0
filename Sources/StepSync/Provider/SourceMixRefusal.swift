import Foundation

/// Why an ingest refuses a source: its kind (the mock, or a real source) is
/// not the kind of the samples the store already holds. Mock steps beside
/// real ones would be counted in every total, uploaded, and never removed by
/// a newer export. Raised before anything is read or written; each case
/// renders as one line naming the way out.
public enum SourceMixRefusal: Error, CustomStringConvertible, Equatable, Sendable {
    /// The mock into a store holding real samples.
    case mockIntoRealStore(store: String, realSamples: Int)
    /// A real source into a store holding mock samples.
    case realIntoMockStore(store: String, mockSamples: Int)

    /// Throws when a source of the given kind would mix kinds in a store
    /// holding `kinds`.
    public static func check(sourceIsMock: Bool, kinds: StoreSourceKinds, store: String) throws {
        if sourceIsMock, kinds.realSamples > 0 { throw mockIntoRealStore(store: store, realSamples: kinds.realSamples) }
        if !sourceIsMock, kinds.mockSamples > 0 { throw realIntoMockStore(store: store, mockSamples: kinds.mockSamples) }
    }

    public var description: String {
        switch self {
        case let .mockIntoRealStore(store, real):
            return "\(store) holds \(Format.count(real)) real samples, and the mock's made-up steps do not go beside them; "
                + "give the mock a store of its own (e.g. --store \(Self.sibling(of: store, suffix: "-mock"))); nothing was stored"
        case let .realIntoMockStore(store, mock):
            return "\(store) holds \(Format.count(mock)) samples of the mock (--source mock), and real steps do not go beside them; "
                + "use a new store (e.g. --store \(Self.sibling(of: store, suffix: "-health"))), or first remove the mock's: "
                + "stepsync forget --store \(store) --source mock; nothing was stored"
        }
    }

    /// "~/steps" → "~/steps-mock".
    static func sibling(of store: String, suffix: String) -> String {
        (store.hasSuffix("/") ? String(store.dropLast()) : store) + suffix
    }
}
