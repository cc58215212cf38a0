/// The `padding` payload: zero bytes that make the next append start on a
/// sector boundary.
public struct PaddingPayload {
    public let bytes: UnsafeRawBufferPointer

    public static func checked(_ bytes: UnsafeRawBufferPointer) -> Result<PaddingPayload, PayloadProblem> {
        if let nonZero = bytes.firstIndex(where: { $0 != 0 }) { return .failure(.nonZeroPadding(at: nonZero)) }
        return .success(PaddingPayload(bytes: bytes))
    }

    /// The number of zero bytes.
    public var length: Int { bytes.count }

    /// Bytes of the padding record, frame included, after which a log ending
    /// at `end` ends on a sector boundary (`paddingSector`): 0 when it does
    /// already; a gap too small for a record header takes a sector more.
    static func frameSize(aligning end: Int64) -> Int64 {
        let sector = Int64(FormatConstants.paddingSector)
        let gap = (sector - end % sector) % sector
        return gap == 0 || gap >= Int64(RecordFrame.headerSize) ? gap : gap + sector
    }

    /// Appends a padding record of `frameSize` bytes in all (from `frameSize(aligning:)`).
    static func append(frameSize: Int64, to buffer: WriteBuffer) {
        append(length: Int(frameSize) - RecordFrame.headerSize, to: buffer)
    }

    /// Appends a framed padding record of `length` zero bytes of payload.
    public static func append(length: Int, to buffer: WriteBuffer) {
        RecordFrame.append(.padding, payloadSize: length, to: buffer) { $0.initializeMemory(as: UInt8.self, repeating: 0, count: length) }
    }
}
