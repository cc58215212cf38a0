import Foundation
import Testing
@testable import StepLog

/// #18.2: a record whose checksum is good but whose type the format does not
/// define is corruption, named by segment and offset in one line: at the end
/// of the newest segment (where a torn write could be forgiven, but a
/// checksummed record is no torn write), inside a sealed segment, and for a
/// version 2 type inside a version 1 segment. Never a crash.
@Suite struct UndefinedRecordTypeTests {
    static let undefined: [UInt8] = [0] + Array(14...255)

    /// A closed store of two segments.
    func writeReference(_ dir: String) throws {
        try writeKnownHistory(dir, segmentSize: 16 << 10, batches: 30, seed: 18)
        #expect(segmentFiles(dir).count >= 2)
    }

    @Test func everyUndefinedTypeAtTheEndOfTheNewestSegmentFailsTheOpen() throws {
        let tmp = TemporaryDirectory()
        let reference = tmp.sub("reference"), work = tmp.sub("work")
        try writeReference(reference)
        let newest = (segmentFiles(reference).last! as NSString).lastPathComponent
        let original = readFile(reference + "/" + newest)
        try copyDirectory(reference, to: work)
        for code in Self.undefined {
            for payload in [[UInt8](), [1, 2, 3]] {
                writeFile(work + "/" + newest, original + SegmentReaderTests.raw(type: code, payload))
                for options in [StoreOptions(), .fullReplay, StoreOptions(readOnly: true)] {
                    let error = #expect(throws: StepLogError.self) { _ = try StepLogStore.open(work, options: options) }
                    let expected = StepLogError.corruption(path: work + "/" + newest, offset: Int64(original.count),
                                                           kind: .malformedRecord(.unknownType(code)))
                    #expect(error == expected)
                    #expect(error?.description == "corruption in \(work)/\(newest) at offset \(original.count): unknown record type \(code)")
                }
                // Nothing was truncated: a checksummed record is not a torn tail.
                #expect(readFile(work + "/" + newest).count == original.count + 9 + payload.count)
            }
        }
    }

    @Test func anUndefinedTypeInsideASealedSegment() throws {
        let tmp = TemporaryDirectory()
        let dir = tmp.sub("store")
        try writeReference(dir)
        // Rewrite a padding record of the first segment in place as a record of
        // type 0xFE of the same size: the segment keeps its length.
        let records = try readAllRecords(dir)
        let pad = try #require(records.first { r in
            if case .padding = r.record { return r.segmentIndex == 0 }; return false
        })
        var bytes = readFile(pad.segment)
        let replacement = SegmentReaderTests.raw(type: 0xFE, [UInt8](repeating: 0, count: pad.size - 9))
        bytes.replaceSubrange(Int(pad.offset)..<pad.end.asInt, with: replacement)
        writeFile(pad.segment, bytes)
        #expect(throws: StepLogError.corruption(path: pad.segment, offset: pad.offset, kind: .malformedRecord(.unknownType(254)))) {
            _ = try StepLogStore.open(dir, options: .fullReplay)
        }
        let verified = try StoreVerifier.verify(directory: dir)
        #expect(verified.problems.contains { $0.file == pad.segment && $0.offset == pad.offset && $0.what == "unknown record type 254" },
                "\(verified.problems)")
    }

    @Test func aVersionTwoTypeInAVersionOneSegment() throws {
        let tmp = TemporaryDirectory()
        let dir = tmp.sub("store")
        try Directory.create(dir)
        let tombstone = GoldenExample.encoded(.sampleDeleted(id: .test(1), deletedAtMilliseconds: 0))
        let path = dir + "/000000000001.log"
        let before = SegmentHeader(sequence: 1, basePosition: 0, version: 1).encoded()
            + GoldenExample.encoded(.sampleUpsert(SampleRecord(sample: makeSample(1), fetchedAtMilliseconds: 0)))
        writeFile(path, before + tombstone + GoldenExample.encoded(.intervalsCleared(atMilliseconds: 0)))
        let offset = Int64(before.count)
        for options in [StoreOptions(), StoreOptions(readOnly: true)] {
            #expect(throws: StepLogError.corruption(path: path, offset: offset, kind: .malformedRecord(.undefinedInVersion(7, version: 1)))) {
                _ = try StepLogStore.open(dir, options: options)
            }
            #expect(PayloadProblem.undefinedInVersion(7, version: 1).description == "record type 7 is not defined in format version 1")
        }
    }
}

extension Int64 {
    var asInt: Int { Int(self) }
}
