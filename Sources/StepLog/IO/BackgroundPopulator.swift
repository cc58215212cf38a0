import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Faults the pages of a fresh anonymous mapping in on another thread, front
/// to back, while the caller already fills it.
///
/// The kernel zeroes each page of a new mapping on first touch; for a
/// gigabytes-large index that is a second or more of one core's time. Done
/// here, it overlaps with checking snapshots and applying them on the other
/// core. No coordination is needed with the thread writing the mapping: a
/// page it touches first it faults in itself, and populating a page already
/// present is a no-op. The owner must call `stop()` before unmapping.
///
/// Linux only (MADV_POPULATE_WRITE, 5.14+); elsewhere, or on older kernels
/// (EINVAL), pages fault in on first touch as usual.
final class BackgroundPopulator: @unchecked Sendable {
    /// Bytes populated per call: small enough that `stop()` returns soon.
    static let pieceBytes = 32 << 20

    private let condition = NSCondition()
    private var stopRequested = false
    private var finished = false

    init(base: UnsafeMutableRawPointer, bytes: Int) {
        #if canImport(Glibc)
        let address = UInt(bitPattern: base)
        let thread = Thread { [self] in
            var at = 0
            while at < bytes {
                condition.lock()
                let stopping = stopRequested
                condition.unlock()
                if stopping { break }
                let length = min(Self.pieceBytes, bytes - at)
                if madvise(UnsafeMutableRawPointer(bitPattern: address + UInt(at)), length, 23) != 0 { break }
                at += length
            }
            condition.lock()
            finished = true
            condition.broadcast()
            condition.unlock()
        }
        thread.stackSize = 1 << 16
        thread.start()
        #else
        finished = true
        #endif
    }

    /// Stops populating and waits until the thread no longer touches the mapping.
    func stop() {
        condition.lock()
        stopRequested = true
        while !finished { condition.wait() }
        condition.unlock()
    }
}
