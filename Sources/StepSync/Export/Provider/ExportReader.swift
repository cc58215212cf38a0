import Foundation
import StepLog

/// One streaming pass over an export: detects zip or XML, picks the export
/// entry of a zip, and runs two threads — this one scanning, a second one
/// reading (and for a zip, inflating and checksumming) — joined by two
/// `BoundedQueue`s around a fixed set of chunks: filled ones forward, empty
/// ones back. Memory is the chunks, one carried-over element, and the kept
/// step records (40 bytes each), whatever the file size.
enum ExportReader {
    static let chunkCapacity = 2 << 20
    static let chunkCount = 6
    static let progressIntervalNanoseconds: UInt64 = 250_000_000

    struct Result {
        /// Sorted by (start, UUID), exact duplicates collapsed, replaced sync
        /// versions removed.
        var records: [ExportStepRecord]
        var sources: [ExportSourceTable.Source]
        var summary: ExportReadSummary
        /// Kept records that carry a sync identifier, and those a higher
        /// version replaced (removed from `records`).
        var synced: [ExportSyncedRecord]
        var replaced: [ExportSyncedRecord]
        /// Kept records whose identity includes metadata: (their id before
        /// metadata counted, their id).
        var reidentified: [(legacy: UUIDBytes, id: UUIDBytes)]
    }

    /// What the reading thread hands over, in order.
    private enum Delivery: Sendable {
        case chunk(ExportChunk)
        /// The input has ended (every chunk before this was delivered).
        case finished
        case failed(Error)
    }

    /// Where the XML bytes come from; opened on the reading thread.
    private enum Origin: Sendable {
        case xml
        case zip(ZipEntry)
    }

    /// Reads the export at `path`. `nowMilliseconds` is the importer's clock
    /// for the sample contract; a `stop` request ends the read within a chunk
    /// (throwing `StoppedByRequest`).
    static func read(path: String, nowMilliseconds: Int64 = Milliseconds.from(Date()), stop: StopSignal? = nil,
                     progress: (@Sendable (ExportReadProgress) -> Void)?) throws -> Result {
        do {
            return try stream(path: path, nowMilliseconds: nowMilliseconds, stop: stop, progress: progress)
        } catch let error as ExportError where error.isAboutTheXML {
            // XML read from a zip that makes no sense is most often a damaged zip: when it is, that is the error.
            throw ZipEntryIntegrity.damageBehindTheXML(of: path) ?? error
        }
    }

    private static func stream(path: String, nowMilliseconds: Int64, stop: StopSignal?,
                               progress: (@Sendable (ExportReadProgress) -> Void)?) throws -> Result {
        let started = DispatchTime.now().uptimeNanoseconds
        let file = try ExportInputFile(path: path)
        var summary = ExportReadSummary()
        let origin: Origin
        switch try ExportInputKind.detect(file) {
        case .xml:
            origin = .xml
            summary.input = "xml"
        case .zip:
            let entries = try ZipCentralDirectory.entries(of: file)
            let choice = try ExportZipEntryFinder.find(in: file, entries: entries)
            origin = .zip(choice.entry)
            summary.input = "zip:" + choice.entry.name
            summary.otherExportsInZip = choice.otherExports
        }

        // At most `chunkCount` chunks exist, so a put on `filled` never waits.
        let filled = BoundedQueue<Delivery>(capacity: chunkCount + 1)
        let empty = BoundedQueue<ExportChunk>(capacity: chunkCount)
        for _ in 0..<chunkCount { empty.put(ExportChunk(capacity: chunkCapacity)) }
        let producerDone = DispatchSemaphore(value: 0)
        let producer = Thread {
            defer { producerDone.signal() }
            do {
                let stream: ExportByteStream
                switch origin {
                case .xml: stream = ExportXMLFileStream(file: file)
                case .zip(let entry): stream = try ZipEntryReader(file: file, entry: entry)
                }
                while let chunk = empty.take() {
                    var count = 0
                    while count < chunk.capacity {
                        let n = try stream.read(into: chunk.data + count, capacity: chunk.capacity - count)
                        if n == 0 { break }
                        count += n
                    }
                    chunk.count = count
                    chunk.inputPosition = stream.inputPosition
                    if count == 0 { break }
                    guard filled.put(.chunk(chunk)) else { return }
                    if count < chunk.capacity { break }
                }
                filled.put(.finished)
            } catch {
                filled.put(.failed(error))
            }
        }
        producer.name = "steplog-export-reader"
        producer.start()
        // Whatever happens below, the reading thread is stopped and gone
        // before this returns (it reads `file`, which closes on deinit).
        defer {
            empty.cancel()
            filled.cancel()
            producerDone.wait()
        }

        let scanner = HealthXMLScanner(path: path, nowMilliseconds: nowMilliseconds)
        var carry = ExportCarryBuffer()
        var lines = ExportLineCounter()
        var lineAtCarry = 1
        var xmlBytes: Int64 = 0
        var inputPosition: Int64 = 0
        // While one element is larger than a chunk, bytes are gathered until
        // the carry has doubled before it is scanned again, so a huge element
        // costs linear, not quadratic, time.
        var gatherUntil = 0
        var lastReport = started
        func report() {
            progress?(ExportReadProgress(bytesRead: inputPosition, totalBytes: file.size, xmlBytes: xmlBytes,
                                         stepRecordsKept: scanner.stepRecordsKept))
        }
        // Once as the stream starts (the file is an export, or a zip with
        // one), so a reader of the progress knows at once what is going on.
        report()

        reading: while let delivery = filled.take() {
            let chunk: ExportChunk
            switch delivery {
            case .chunk(let next): chunk = next
            case .finished: break reading
            case .failed(let error): throw error
            }
            if let stop, stop.isRequested { throw StoppedByRequest(stage: "reading the export") }
            xmlBytes += Int64(chunk.count)
            inputPosition = chunk.inputPosition
            if gatherUntil == 0 {
                // Put the carried bytes right before the chunk's data and scan both as one run.
                let start = chunk.data - carry.count
                start.update(from: carry.base, count: carry.count)
                let total = carry.count + chunk.count
                lines.reset(base: start, lineAtBase: lineAtCarry)
                let consumed = try scanner.scan(start, count: total, atEnd: false, lines: &lines)
                lineAtCarry = lines.line(at: consumed)
                carry.replace(with: start + consumed, count: total - consumed)
                empty.put(chunk)
            } else {
                carry.append(chunk.data, count: chunk.count)
                empty.put(chunk)
                if carry.count >= gatherUntil {
                    lines.reset(base: carry.base, lineAtBase: lineAtCarry)
                    let consumed = try scanner.scan(carry.base, count: carry.count, atEnd: false, lines: &lines)
                    lineAtCarry = lines.line(at: consumed)
                    carry.removeFirst(consumed)
                }
            }
            if carry.count > ExportChunk.prefixCapacity {
                gatherUntil = max(gatherUntil, 2 * carry.count)
            } else {
                gatherUntil = 0
            }
            if progress != nil {
                let now = DispatchTime.now().uptimeNanoseconds
                if now - lastReport >= progressIntervalNanoseconds {
                    lastReport = now
                    report()
                }
            }
        }
        if let stop, stop.isRequested { throw StoppedByRequest(stage: "reading the export") }
        lines.reset(base: carry.base, lineAtBase: lineAtCarry)
        _ = try scanner.scan(carry.base, count: carry.count, atEnd: true, lines: &lines)
        report()

        var records = scanner.builder.takeRecords()
        records.sort(by: ExportStepRecord.precedes)
        // Identical identities sort next to each other (the start is part of
        // the identity): keep the first of each run.
        var kept = 0
        for i in records.indices {
            if kept > 0, records[kept - 1].idHigh == records[i].idHigh, records[kept - 1].idLow == records[i].idLow {
                summary.duplicatesCollapsed += 1
                continue
            }
            records[kept] = records[i]
            kept += 1
        }
        records.removeLast(records.count - kept)

        // Sync identifiers: only the highest version of each is a current sample.
        let (synced, replaced) = scanner.builder.sync.resolve()
        let gone = Set(replaced.map { UUIDBytes($0.id) })
        if !gone.isEmpty {
            records.removeAll { gone.contains(UUIDBytes(high: $0.idHigh, low: $0.idLow)) }
            summary.syncVersionsReplaced = replaced.count
        }
        var seen = Set<UUIDBytes>()
        let reidentified = scanner.builder.reidentified.filter { !gone.contains($0.id) && seen.insert($0.id).inserted }

        summary.recordsKept = records.count
        summary.malformedStepRecords = scanner.malformedStepRecords
        summary.malformedExamples = scanner.malformedExamples
        summary.outOfContractStepRecords = scanner.outOfContractStepRecords
        summary.outOfContractExamples = scanner.outOfContractExamples
        summary.nestedStepRecordsSkipped = scanner.nestedStepRecordsSkipped
        summary.fractionalStepRecords = scanner.builder.fractionalValues
        summary.roundedStepRecords = scanner.builder.roundedValues
        summary.unreadableFieldStepRecords = scanner.unreadableFieldStepRecords
        summary.lenientStepRecords = scanner.lenientStepRecords
        summary.exportDateMilliseconds = scanner.exportDateMilliseconds
        summary.unreadableExportDate = scanner.unreadableExportDate
        summary.bytesRead = inputPosition
        summary.xmlBytes = xmlBytes
        summary.seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        return Result(records: records, sources: scanner.builder.resolvedSources(), summary: summary,
                      synced: synced, replaced: replaced, reidentified: reidentified)
    }
}
