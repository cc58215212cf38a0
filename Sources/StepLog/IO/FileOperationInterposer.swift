/// The I/O seam under StepLog: when `FileOperations.interposer` is set, every
/// mutating file operation of the engine (`FileOperation`) goes through it
/// instead of straight to the system, so a test can record each one (bytes,
/// offsets, order, across several opens of a store) and fail any of them
/// with an errno of its choosing.
///
/// Contract for a conforming type:
/// - `intercept` is called once per operation, on the thread doing it (the
///   writer's, the preallocator's, the snapshot worker's), possibly from
///   several threads at once: it must be thread-safe, and an implementation
///   that records an order must perform and record under one lock.
/// - `perform` runs the real system call (at most once) and returns 0 on
///   success or the errno it failed with. `intercept` returns 0 for success
///   or an errno: either `perform`'s, or one it injects without calling
///   `perform` (the operation then had no effect on disk).
/// - For `.openForWriting`, the descriptor `perform` opened is the one the
///   engine uses; an interposer that injects a failure must not call it.
///
/// Production runs with no interposer: each operation then costs one load
/// of a global and a branch, next to a system call (upsert throughput in
/// `tools/bench engine` within noise of the code before the seam: README,
/// Performance).
public protocol FileOperationInterposer: AnyObject, Sendable {
    func intercept(_ operation: FileOperation, perform: () -> Int32) -> Int32
}

/// Where the seam is installed.
public enum FileOperations {
    /// The installed interposer, or nil (production). Set it before opening a
    /// store and clear it after closing; it is read without a lock.
    nonisolated(unsafe) public static var interposer: (any FileOperationInterposer)?
}
