// Fuzz target `record`: the record frame decoder and every record type's
// payload decoder (Sources/StepLog/Format).
//
// Input: the bytes of one frame (`length u32 | type u8 | crc u32 | payload`),
// decoded as a segment reader does; and, whatever the checksum says, byte 4
// as a type and the bytes after the 9-byte header as its payload, decoded
// as replay does after a checksum matched.
//
// Invariants beyond "no crash":
// - a frame decode never reports a record beyond the input;
// - a decoded record re-encodes to a frame that decodes to the same record
//   and, for every type whose encoding is canonical, to the same bytes (a
//   sample only when it is valid, as every writer requires);
// - the sample payload view's field readers agree with the full decode.
#if canImport(Glibc)
import Glibc
#endif
@testable import StepLog

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRecord(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    switch RecordFrame.decode(bytes, at: 0) {
    case .record(let type, let payload, let recordSize):
        fuzzCheck(recordSize <= size && recordSize == FormatConstants.recordHeaderSize + payload.count,
                  "frame of \(recordSize) bytes in \(size)")
        checkPayload(type: type, payload: payload)
    case .truncatedHeader(let available):
        fuzzCheck(available == size && size < FormatConstants.recordHeaderSize, "truncated header with \(available) of \(size)")
    case .truncatedPayload(let declared, let available):
        fuzzCheck(declared > available, "truncated payload: declared \(declared), available \(available)")
    case .impossibleLength(let n):
        fuzzCheck(n > FormatConstants.maxRecordPayload, "impossible length \(n)")
    case .checksumMismatch(let stored, let computed):
        fuzzCheck(stored != computed, "checksum mismatch with equal checksums")
    }
    // The payload decoders on their own, as if the checksum had matched.
    if size >= FormatConstants.recordHeaderSize {
        checkPayload(type: data[4], payload: UnsafeRawBufferPointer(rebasing: bytes[FormatConstants.recordHeaderSize...]))
    }
    return 0
}

private func checkPayload(type: UInt8, payload: UnsafeRawBufferPointer) {
    let decoded = LogRecord.decode(type: type, payload: payload)
    guard case .success(let record) = decoded else { return }
    fuzzCheck(record.type.rawValue == type, "decoded type \(record.type) from code \(type)")
    // Writers take only valid samples (upsert checks validationProblem first):
    // a stored name of invalid UTF-8 decodes with replacement characters, up
    // to three times longer, past what a record may hold. Such a sample is
    // checked by the fast readers below but not re-encoded.
    if case .sampleUpsert(let r) = record, r.sample.validationProblem != nil {
        checkSampleView(payload, against: r)
        return
    }
    // Likewise a rejection reason of invalid UTF-8: it decodes with
    // replacement characters, and the writer clips what grew past its limit.
    // (Looked for among scalars: a replacement character followed by a
    // combining mark is one Character that is not "\u{FFFD}"; found by fuzzing.)
    if case .samplesRejected(let rejections) = record,
       rejections.contains(where: { $0.reason.unicodeScalars.contains("\u{FFFD}") }) { return }
    if case .samplesUnacknowledged(let entries) = record,
       entries.contains(where: { $0.reason.unicodeScalars.contains("\u{FFFD}") }) { return }
    // And a destination's names: the writer records only valid ones (validationProblem).
    if case .destination(let d) = record,
       d.validationProblem != nil || [d.serverId, d.user, d.url].contains(where: { $0.unicodeScalars.contains("\u{FFFD}") }) { return }

    let buffer = WriteBuffer(capacity: 64)
    record.append(to: buffer)
    let encoded = buffer.bytes
    guard case .record(let type2, let payload2, let size2) = RecordFrame.decode(encoded, at: 0) else {
        fuzzCheck(false, "re-encoded \(record.type) does not decode as a frame"); return
    }
    fuzzCheck(size2 == encoded.count && type2 == type, "re-encoded frame has size \(size2) of \(encoded.count), type \(type2)")
    let again = LogRecord.decode(type: type2, payload: payload2)
    fuzzCheck(again == .success(record), "re-encoded \(record.type) decodes differently: \(again) vs \(record)")

    if case .sampleUpsert(let r) = record {
        checkSampleView(payload, against: r)
        // Strings are compared byte-wise: only bytes that were valid UTF-8 survive the String.
        if isCanonicalSample(payload) {
            fuzzCheck((try? SamplePayload.checked(payload).get())?.hasSameContent(as: r.sample) == true, "hasSameContent is false for its own decode")
            fuzzCheck(payload2.elementsEqual(payload), "sample payload does not re-encode to the same bytes")
        }
    } else {
        fuzzCheck(payload2.elementsEqual(payload), "\(record.type) payload does not re-encode to the same bytes")
    }
}

/// The view's field readers, which replay and the daily totals use, read
/// what the full decode read.
private func checkSampleView(_ payload: UnsafeRawBufferPointer, against r: SampleRecord) {
    guard case .success(let view) = SamplePayload.checked(payload) else { fuzzCheck(false, "a decoded sample has no view"); return }
    fuzzCheck(view.uuid.uuid == r.sample.id, "view uuid differs")
    fuzzCheck(view.startMilliseconds == r.sample.startMilliseconds && view.endMilliseconds == r.sample.endMilliseconds,
              "view start or end differs")
    fuzzCheck(Int64(view.countThousandths) == r.sample.countThousandths && view.fetchedAtMilliseconds == r.fetchedAtMilliseconds, "view count or fetchedAt differs")
    fuzzCheck(view.origin == r.sample.origin && view.isSynced == r.isSynced, "view origin or synced flag differs")
    fuzzCheck(String(decoding: view.sourceBundleId, as: UTF8.self) == r.sample.sourceBundleId, "view bundle differs")
    fuzzCheck(view.sourceDeviceName.map { String(decoding: $0, as: UTF8.self) } == r.sample.sourceDeviceName, "view device differs")
    let span = view.span
    fuzzCheck(span.id == view.uuid && span.countThousandths == view.countThousandths && span.sourceBundleId.elementsEqual(view.sourceBundleId), "span differs")
}

/// True when re-encoding the sample must give the same bytes: no undefined
/// flag bits and both strings valid UTF-8.
private func isCanonicalSample(_ payload: UnsafeRawBufferPointer) -> Bool {
    let known = FormatConstants.sampleFlagSynced | FormatConstants.sampleFlagHasDeviceName | FormatConstants.sampleOriginMask
        | FormatConstants.sampleFlagHasCountFraction
    guard let view = try? SamplePayload.checked(payload).get(), view.flags & ~known == 0 else { return false }
    return isValidUTF8(view.sourceBundleId) && view.sourceDeviceName.map(isValidUTF8) != false
}

private func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
    var iterator = bytes.makeIterator()
    var decoder = UTF8()
    while true {
        switch decoder.decode(&iterator) {
        case .scalarValue: continue
        case .emptyInput: return true
        case .error: return false
        }
    }
}

/// Seeds: one frame of each record type a small store holds (`tools/fuzz --make-seeds`).
@_cdecl("LLVMFuzzerInitialize")
public func initializeRecordFuzz(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> CInt {
    FuzzSeeds.writeIfRequested { dir in
        let store = fuzzScratchDirectory + "/record-seeds"
        try FuzzSeedStore.write(to: store)
        var perType: [UInt8: Int] = [:]
        for path in try FuzzSeedStore.segmentPaths(in: store) {
            for frame in FuzzSeedStore.frames(ofSegment: fuzzReadFile(path)) where perType[frame[4], default: 0] < 2 {
                FuzzSeeds.write(frame, named: "type\(frame[4])-\(perType[frame[4], default: 0])", in: dir)
                perType[frame[4], default: 0] += 1
            }
        }
    }
    return 0
}
