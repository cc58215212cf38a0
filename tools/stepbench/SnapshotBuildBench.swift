import Foundation
import StepLog
import StepSync
import ToolSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How fast a sealed segment's index snapshot is built (the background work
/// behind every segment roll and every reopen after a crash), beside the peer
/// that bounds it: reading the same segment's bytes, in the same run.
struct SnapshotBuildBench {
    var directory: String
    var json = false

    struct Figures: Encodable {
        var segments: Int
        var bytes: Int64
        var entries: Int
        var buildSeconds: Double
        var readSeconds: Double
    }

    func run() throws {
        let store = try StepLogStore.open(directory, options: StoreOptions(readOnly: true))
        let sealed = Array(store.segmentInfos.dropLast())
        try store.close()
        guard !sealed.isEmpty else { throw BenchError("\(directory): no sealed segment to build a snapshot of") }
        var figures = Figures(segments: sealed.count, bytes: sealed.reduce(0) { $0 + $1.size }, entries: 0, buildSeconds: 0, readSeconds: 0)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        for (i, segment) in sealed.enumerated() {
            // The file is in the page cache for both (the build reads it first
            // time round too when it follows a roll), so neither pays the disk.
            let (_, read) = try measure { try readWhole(segment, into: &buffer) }
            let (snapshot, build) = try measure { try SegmentSnapshot.build(from: segment, keysAfter: 0) }
            figures.readSeconds += read
            figures.buildSeconds += build
            figures.entries += snapshot.samples.count
            FileHandle.standardError.write(Data("  snapshot \(i + 1)/\(sealed.count): \(segment.name), \(snapshot.samples.count) entries, \(fmt(build, 3)) s\n".utf8))
        }
        if json {
            print(String(decoding: try JSONEncoder().encode(figures), as: UTF8.self))
            return
        }
        let megabytes = Double(figures.bytes) / 1e6
        print("snapshot build: \(Format.count(figures.segments, "segment")), \(mib(Int(figures.bytes))), \(figures.entries) entries in \(fmt(figures.buildSeconds, 3)) s: "
              + "\(fmt(megabytes / figures.buildSeconds, 0)) MB/s, \(rate(figures.entries, figures.buildSeconds)) entries/s")
        print("  peer, reading the same bytes: \(fmt(megabytes / figures.readSeconds, 0)) MB/s; build/read = \(fmt(figures.readSeconds / figures.buildSeconds, 2))")
    }

    private func readWhole(_ segment: SegmentInfo, into buffer: inout [UInt8]) throws {
        let fd = try FileDescriptor.open(segment.path, O_RDONLY)
        defer { fd.close() }
        var offset: Int64 = 0
        let capacity = buffer.count
        while offset < segment.size {
            let n = try buffer.withUnsafeMutableBytes { try fd.read(into: $0.baseAddress!, count: capacity, at: offset) }
            guard n > 0 else { throw BenchError("\(segment.path): ended at offset \(offset) of \(segment.size)") }
            offset += Int64(n)
        }
    }
}
