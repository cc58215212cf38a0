/// One kept step record, compact (40 bytes): everything a `StepSample` needs,
/// with the source and device names interned in an `ExportSourceTable`.
struct ExportStepRecord: Sendable, Equatable {
    var startMilliseconds: Int64
    var endMilliseconds: Int64
    /// The derived UUID as two big-endian halves (`UUIDBytes`).
    var idHigh: UInt64
    var idLow: UInt64
    /// The count in thousandths of a step (a kept record's is at most the
    /// contract's 1 000 000 steps, so 32 bits hold it).
    var countThousandths: UInt32
    /// Index into `ExportSourceTable.sources`.
    var source: UInt32

    /// The provider's order: by start, then by UUID (the UUID's byte order,
    /// which is the order of its uppercase string).
    @inline(__always)
    static func precedes(_ a: ExportStepRecord, _ b: ExportStepRecord) -> Bool {
        if a.startMilliseconds != b.startMilliseconds { return a.startMilliseconds < b.startMilliseconds }
        if a.idHigh != b.idHigh { return a.idHigh < b.idHigh }
        return a.idLow < b.idLow
    }
}
