import Foundation
import StepSync
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Turns the first SIGINT/SIGTERM into a stop request (finish the current
/// batch, sync, exit 130); a second one exits at once (the store is safe
/// either way: nothing acknowledged is lost to a kill).
public final class SignalTrap: @unchecked Sendable {
    public let stop = StopSignal()
    private var sources: [DispatchSourceSignal] = []
    private let queue = DispatchQueue(label: "signals")

    public init(onFirst: @escaping @Sendable (Int32) -> Void = { _ in }) {
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler { [stop] in
                if stop.isRequested { exit(130) }
                stop.request()
                onFirst(sig)
            }
            source.resume()
            sources.append(source)
        }
    }
}
