import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Starts a store's compactions in the background and runs one at a time on
/// its own low-priority thread (`StepLogStore.compactInBackground`; Pebble's
/// compaction scheduler):
/// - on its own, when `CompactionPicker` says the dead bytes call for one
///   (asked on open and each time a segment is sealed);
/// - on request, when another process (`steplog compact` on a store this
///   process holds locked) left a `COMPACT-REQUEST` file: looked for every
///   half second on a timer, whether the writer is busy or idle (and at each
///   `sync()`), taken (the file removed) when the compaction starts, answered
///   in `COMPACT-RESULT`.
final class CompactionScheduler: @unchecked Sendable {
    /// Asks the writer holding a store to compact it (any content).
    static let requestFileName = "COMPACT-REQUEST"
    /// The answer: one line, `ok <bytes before> <bytes after> <seconds>` or `failed <message>`.
    static let resultFileName = "COMPACT-RESULT"
    /// How often a writer looks for a request (one `stat` of the file).
    static let requestInterval = 0.5

    private let lock = NSCondition()
    private var running = false
    private var stopping = false
    private var lastRequestCheck = 0.0
    /// Looks for a request while the store is open for writing (`watchForRequests`).
    private var requestTimer: DispatchSourceTimer?
    /// Compactions finished by this store object, and the last error.
    private(set) var finishedCount = 0
    private(set) var lastError: Error?
    private(set) var lastReport: CompactionReport?

    var isStopping: Bool { lock.withLock { stopping } }
    var isRunning: Bool { lock.withLock { running } }

    /// Starts a compaction when the dead bytes call for one. Called with the
    /// store's mutex held (or during its init).
    func consider(_ store: StepLogStore) {
        guard store.writer != nil, !isRunning, !isStopping, CompactionPicker.isDue(store) else { return }
        start(store, answering: false)
    }

    /// Starts a compaction when another process asked for one (rate-limited
    /// to one look at the directory every half second).
    func noticeRequest(_ store: StepLogStore) {
        let now = Date().timeIntervalSinceReferenceDate
        let due = lock.withLock { () -> Bool in
            guard !running, !stopping, now - lastRequestCheck >= Self.requestInterval else { return false }
            lastRequestCheck = now
            return true
        }
        guard due, Directory.kind(of: Directory.join(store.directory, Self.requestFileName)) != nil else { return }
        start(store, answering: true)
    }

    /// Looks for a request every `requestInterval` seconds until `stop`, so
    /// that a writer that neither writes nor syncs (a long-running stepsync
    /// waiting for its source or its server) answers too. The timer holds
    /// neither the store nor this object: it looks at the file by its path
    /// and takes the store only when a request is there.
    func watchForRequests(_ store: StepLogStore) {
        let path = Directory.join(store.directory, Self.requestFileName)
        lock.withLock {
            // Made and resumed here, or not at all: a source released unresumed is an error.
            guard !stopping, requestTimer == nil else { return }
            let timer = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
            timer.schedule(deadline: .now() + Self.requestInterval, repeating: Self.requestInterval, leeway: .milliseconds(100))
            timer.setEventHandler { [weak self, weak store] in
                guard Directory.kind(of: path) != nil, let self, let store else { return }
                self.noticeRequest(store)
            }
            requestTimer = timer
            timer.resume() // the handler runs on the queue, never here
        }
    }

    /// Starts a compaction now unless one is running; false when none started.
    @discardableResult
    func startNow(_ store: StepLogStore) -> Bool {
        guard !isRunning, !isStopping else { return false }
        start(store, answering: false)
        return true
    }

    private func start(_ store: StepLogStore, answering: Bool) {
        let go = lock.withLock { () -> Bool in
            guard !running, !stopping else { return false }
            running = true
            return true
        }
        guard go else { return }
        // Taken: the asking process can tell a holder that is compacting from one that never looked.
        if answering { try? Directory.remove(Directory.join(store.directory, Self.requestFileName)) }
        let thread = Thread { [self] in
            Self.lowerPriority()
            var answer: String
            do {
                let observer = store.options.onBackgroundCompactionStep
                let report = try store.compactInBackground(stop: observer.map { observe in { step in observe(step) } })
                answer = "ok \(report.before.bytes) \(report.after.bytes) \(report.seconds)"
                lock.withLock { finishedCount += 1; lastError = nil; lastReport = report }
            } catch {
                answer = "failed \(error)"
                lock.withLock { lastError = error }
            }
            if answering { Self.answer(answer, in: store.directory) }
            lock.withLock {
                running = false
                lock.broadcast()
            }
        }
        thread.stackSize = 1 << 20
        thread.qualityOfService = .background
        thread.start()
    }

    /// Waits for a running compaction to end (it stops at its next group of
    /// records when it has not committed yet); none starts afterwards.
    func stop() {
        lock.withLock {
            stopping = true
            requestTimer?.cancel()
            requestTimer = nil
            while running { lock.wait() }
        }
    }

    deinit { requestTimer?.cancel() }

    /// Waits for a running compaction to end (tests, benches).
    func wait() {
        lock.withLock { while running { lock.wait() } }
    }

    /// On Linux, `qualityOfService` does not reach the scheduler: the thread's
    /// nice value does (per thread).
    private static func lowerPriority() {
        #if canImport(Glibc)
        // Linux keeps nice values per thread; 0 names the calling thread.
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
        #endif
    }

    private static func answer(_ line: String, in directory: String) {
        let path = Directory.join(directory, resultFileName)
        let temporary = path + FormatConstants.temporarySuffix
        guard let fd = try? FileDescriptor.open(temporary, O_WRONLY | O_CREAT | O_TRUNC) else { return }
        _ = try? Array((line + "\n").utf8).withUnsafeBytes { try fd.write($0, at: 0) }
        try? fd.sync()
        fd.close()
        try? Directory.rename(temporary, to: path)
        try? Directory.sync(directory)
    }
}

extension StepLogStore {
    /// The file another process creates in a store's directory to ask the
    /// writer holding it to compact (the writer looks every half second,
    /// busy or idle, and removes it when it starts).
    public static let compactionRequestFileName = CompactionScheduler.requestFileName
    /// The writer's answer: `ok <bytes before> <bytes after> <seconds>` or `failed <message>`.
    public static let compactionResultFileName = CompactionScheduler.resultFileName

    /// Starts compacting in the background now (on a low-priority thread),
    /// whatever the dead bytes; false when one is already running.
    @discardableResult
    public func startBackgroundCompaction() -> Bool { scheduler.startNow(self) }

    /// What the last background compaction that finished did.
    public var backgroundCompactionReport: CompactionReport? { scheduler.lastReport }

    /// The error of the last background compaction that failed (nil once one succeeds).
    public var backgroundCompactionError: Error? { scheduler.lastError }

    /// Waits for a compaction running in the background to end.
    public func waitForBackgroundCompaction() { scheduler.wait() }

    /// Compactions this store object finished in the background.
    public var backgroundCompactions: Int { scheduler.finishedCount }
}
