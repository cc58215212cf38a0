import Foundation
import StepLog
import StepSync
import ToolSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `steplog dump DIR`.
enum DumpCommand {
    static let usage = """
        usage: steplog dump DIR [--segment N] [--json]

        Every record in log order with its segment, offset and log position (one line
        each; JSON lines with --json). Damage is printed where it is found, and the
        dump goes on with the next segment.

        options:
          --segment N   only segment N (the number in its file name: 000000000001.log is 1)
          --json        one JSON object per record or damage
        """

    static func run(_ arguments: [String], out: OutputSink) throws -> Int32 {
        guard let (dir, args) = try SteplogTool.parse(arguments, usage: usage, out: out, options: ["segment"], flags: ["json"]) else { return 0 }
        try StoreDirectoryCheck.requireExisting(dir)
        var only: UInt64?
        if let text = args.value("segment") {
            guard let n = UInt64(text) else { throw Arguments.UsageError("--segment must be a segment number, found '\(text)'") }
            only = n
        }
        let json = args.has("json")
        let names = try Directory.names(in: dir).compactMap { name in SegmentName.sequence(of: name).map { ($0, name) } }.sorted { $0.0 < $1.0 }
        if let only, !names.contains(where: { $0.0 == only }) {
            let present = names.map { String($0.0) }.joined(separator: ", ")
            throw NoSuchSegment(description: "\(dir) has no segment \(only); its segments are " + (present.isEmpty ? "none" : present)
                                + " (a compaction writes its segments under new numbers)")
        }
        for (sequence, name) in names where only == nil || only == sequence {
            let path = Directory.join(dir, name)
            let fd = try FileDescriptor.open(path, O_RDONLY)
            defer { fd.close() }
            let size = try fd.size()
            let header: SegmentHeader
            switch try SegmentHeader.read(fd) {
            case .success(let h): header = h
            case .failure(let problem):
                if json {
                    var w = JSONWriter()
                    w.beginObject(); w.field("segment", name); w.field("offset", 0); w.field("damage", problem.description); w.endObject()
                    out.line(w.string)
                } else {
                    out.line("\(name) @ 0: damage: \(problem)")
                }
                continue
            }
            if !json {
                out.line("\(name): version \(header.version), sequence \(header.sequence), base position \(header.basePosition), \(size) bytes, records from offset \(header.dataStart)"
                         + (header.rangeEnd != 0 ? ", range ends at position \(header.rangeEnd)" : "")
                         + (header.isCompactionOutput ? ", compaction output (through \(header.compactedThrough))\(header.isCompactionFinal ? ", final" : "")" : ""))
            }
            var reader = SegmentReader(fd: fd, fileSize: size, from: header.dataStart)
            while let item = try reader.next() {
                switch item {
                case .record(let offset, let type, let payload, let recordSize):
                    out.write(line(name: name, offset: offset, position: header.basePosition + UInt64(offset), size: recordSize,
                                   type: type, payload: payload, json: json) + "\n")
                case .damage(let offset, let damage):
                    if json {
                        var w = JSONWriter()
                        w.beginObject(); w.field("segment", name); w.field("offset", offset); w.field("damage", damage.description); w.endObject()
                        out.line(w.string)
                    } else {
                        out.line("\(name) @ \(offset): damage: \(damage)")
                    }
                }
            }
        }
        return 0
    }

    /// `--segment N` for a store that has no segment N (exit 1).
    struct NoSuchSegment: Error, CustomStringConvertible {
        var description: String
    }

    /// One field of a dumped record.
    enum Value {
        case text(String?), number(Int64), flag(Bool), time(Int64), list([String])
        /// A step count in thousandths, written as the wire writes it (`2741.7`, `45`).
        case steps(Int64)
    }

    static func fields(type: UInt8, payload: UnsafeRawBufferPointer) -> (String, [(String, Value)]) {
        switch LogRecord.decode(type: type, payload: payload) {
        case .failure(let problem):
            return ("type-\(type)", [("problem", .text(problem.description))])
        case .success(let record):
            let name = SteplogTool.typeName(record.type)
            switch record {
            case .sampleUpsert(let r):
                return (name, [("id", .text(r.sample.id.uuidString)), ("start", .time(r.sample.startMilliseconds)),
                               ("end", .time(r.sample.endMilliseconds)), ("count", .steps(r.sample.countThousandths)),
                               ("sourceBundleId", .text(r.sample.sourceBundleId)), ("sourceDeviceName", .text(r.sample.sourceDeviceName)),
                               ("fetchedAt", .time(r.fetchedAtMilliseconds)), ("synced", .flag(r.isSynced)),
                               ("origin", .text(r.sample.origin.description))])
            case .samplesAcknowledged(let ids):
                return (name, [("ids", .list(ids.map(\.uuidString)))])
            case .sampleDeleted(let id, let at):
                return (name, [("id", .text(id.uuidString)), ("deletedAt", .time(at))])
            case .samplesRejected(let list):
                return (name, [("ids", .list(list.map(\.id.uuidString))), ("reasons", .list(list.map(\.reason))),
                               ("rejectedAt", .list(list.map { ISO8601.format(milliseconds: $0.rejectedAtMilliseconds) }))])
            case .samplesUnacknowledged(let list):
                return (name, [("ids", .list(list.map(\.id.uuidString))), ("reasons", .list(list.map(\.reason))),
                               ("at", .list(list.map { ISO8601.format(milliseconds: $0.rejectedAtMilliseconds) }))])
            case .destination(let d):
                return (name, [("serverId", .text(d.serverId)), ("user", .text(d.user)), ("url", .text(d.url)),
                               ("uploader", .text(d.uploader.uuidString)), ("recordedAt", .time(d.recordedAtMilliseconds)),
                               ("provenEqualAt", .time(d.provenEqualAtMilliseconds))])
            case .syncedThrough(let offset):
                return (name, [("offset", .number(Int64(offset)))])
            case .padding(let length):
                return (name, [("zeros", .number(Int64(length)))])
            case .sourceAnchor(let family, let anchor):
                return (name, [("family", .text(String(family, radix: 16))), ("anchorBytes", .number(Int64(anchor.count))),
                               ("anchor", .text(anchorText(anchor)))])
            case .intervalStatus(let i):
                return (name, [("id", .text(i.id.uuidString)), ("start", .time(i.startMilliseconds)), ("end", .time(i.endMilliseconds)),
                               ("stepCount", .number(i.stepCount)), ("status", .text(i.status.description))])
            case .intervalsCleared(let at):
                return (name, [("at", .time(at))])
            case .layeringRange(let r):
                return (name, [("start", .time(r.startMilliseconds)), ("end", .time(r.endMilliseconds)),
                               ("source", .text(String(r.sourceFingerprint, radix: 16)))])
            case .dailyHighScore(let h):
                return (name, [("day", .number(Int64(h.day))), ("steps", .number(h.steps)), ("recordedAt", .time(h.recordedAtMilliseconds))])
            }
        }
    }

    /// An anchor as text when it is printable UTF-8 (an export's date), else hex.
    static func anchorText(_ anchor: [UInt8]) -> String {
        if let text = String(validating: anchor, as: UTF8.self), text.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) {
            return text
        }
        return anchor.map { String(format: "%02x", $0) }.joined()
    }

    static func line(name: String, offset: Int64, position: UInt64, size: Int, type: UInt8, payload: UnsafeRawBufferPointer, json: Bool) -> String {
        let (typeName, values) = fields(type: type, payload: payload)
        if json {
            var w = JSONWriter()
            w.beginObject()
            w.field("segment", name)
            w.field("offset", offset)
            w.field("position", Int64(position))
            w.field("size", size)
            w.field("type", typeName)
            for (key, value) in values {
                w.key(key)
                switch value {
                case .text(let t): w.value(t)
                case .number(let n): w.value(n)
                case .steps(let thousandths): w.stepCount(thousandths: thousandths)
                case .flag(let b): w.value(b)
                case .time(let ms): w.timestamp(milliseconds: ms)
                case .list(let items): w.beginArray(); for i in items { w.value(i) }; w.endArray()
                }
            }
            w.endObject()
            return w.string
        }
        let rendered = values.map { key, value -> String in
            switch value {
            case .text(let t): return "\(key)=\(t.map { "\"\($0)\"" } ?? "null")"
            case .number(let n): return "\(key)=\(n)"
            case .steps(let thousandths): return "\(key)=\(StepCountText.format(thousandths: thousandths))"
            case .flag(let b): return "\(key)=\(b)"
            case .time(let ms): return "\(key)=\(ISO8601.format(milliseconds: ms))"
            case .list(let items): return "\(key)=[\(items.count)] " + items.prefix(3).joined(separator: ",") + (items.count > 3 ? ",…" : "")
            }
        }
        return "\(name) @ \(offset) (position \(position), \(size) bytes) \(typeName) " + rendered.joined(separator: " ")
    }
}
