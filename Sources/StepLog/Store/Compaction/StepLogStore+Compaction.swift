import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension StepLogStore {
    /// Compacts the store in `directory`: rewrites only what is live (the
    /// current version of each sample with its synced state folded in, each
    /// pending deletion's tombstone, the latest status of each interval,
    /// current layering ranges, each day's high score, the latest anchor of
    /// each source family) into new version 2 segments, switches to them
    /// atomically and deletes the old. Acknowledged deletions leave nothing.
    ///
    /// Offline: it takes the writer lock (another writer gets `.locked`).
    /// Streaming: it reads the input through a bounded window and writes
    /// through a 1 MiB buffer; beyond the index it holds a few MiB.
    /// Crash-safe at every step: outputs are written as temporary files and the
    /// last one, flagged final, is renamed into place last (the commit); opening
    /// finishes a committed compaction (deletes the inputs left) and discards an
    /// uncommitted one. `stop` (tests) can end it after any `CompactionStep`.
    public static func compact(directory: String, options: StoreOptions = StoreOptions(),
                               progress: ((_ read: Int64, _ total: Int64) -> Void)? = nil,
                               stop: ((CompactionStep) throws -> Void)? = nil) throws -> CompactionReport {
        let started = Date()
        let store = try StepLogStore.open(directory, options: options)
        var report = CompactionReport()
        defer { store.abandon() }
        // None in the background beside this one (by dead bytes at open, or a request file the timer finds).
        store.scheduler.stop()
        try store.locked { try store.compactLocked(report: &report, progress: progress, stop: stop) }
        report.seconds = Date().timeIntervalSince(started)
        return report
    }

    /// Gives up the store object without touching its files again (after a
    /// compaction replaced them, or a simulated crash), releasing the lock as
    /// a dying process would.
    func abandon() {
        scheduler.stop()
        locked {
            syncer.drain()
            snapshots.wait()
            writer?.stopPreallocating()
            writer?.close()
            writer = nil
            readers.closeAll()
            isClosed = true
            releaseLock()
        }
    }

    private func compactLocked(report: inout CompactionReport, progress: ((Int64, Int64) -> Void)?,
                               stop: ((CompactionStep) throws -> Void)?) throws {
        let w = try writableWriter()
        try w.sync()
        try w.trimZeroFill()
        snapshots.wait()
        var inputs = segments
        inputs[inputs.count - 1] = w.info
        try stop?(.started)

        let output = try CompactionOutput(
            directory: directory, firstSequence: inputs.last!.sequence + 1, basePosition: inputs.last!.endPosition,
            compactedThrough: inputs.last!.sequence, segmentSize: options.segmentSize, writeSnapshots: options.writeSnapshots,
            onSegmentWritten: { n in try stop?(.outputWritten(n)) })
        let executor = CompactionExecutor(store: self)
        var before = StoreFigures()
        let read = try executor.copyLive(inputs, to: output, before: &before, judging: { $0() }, progress: progress)
        report.before = before
        report.bytesRead = read
        let outputs = try output.finish()
        report.after = CompactionExecutor.figuresAfter(outputs, output: output, before: before)
        _ = try executor.commit(outputs, rangeEnd: 0, stop: stop)
        try executor.removeInputs(inputs, stop: stop)
    }
}
