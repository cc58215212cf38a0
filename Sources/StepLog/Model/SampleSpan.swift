/// A sample version's fields read in place from its record: no `String`, no
/// `UUID`, no allocation. The byte views are valid only during the call.
public struct SampleSpan {
    /// The sample's UUID.
    public var id: UUIDBytes
    /// Its origin label (flag bits 2...3).
    public var origin: SampleOrigin
    public var startMilliseconds: Int64
    public var endMilliseconds: Int64
    /// The count in thousandths of a step.
    public var countThousandths: UInt64
    /// UTF-8 bytes of `sourceBundleId`.
    public var sourceBundleId: UnsafeRawBufferPointer
    /// UTF-8 bytes of `sourceDeviceName`; nil when the sample has none.
    public var sourceDeviceName: UnsafeRawBufferPointer?
}
