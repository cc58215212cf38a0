import Foundation
import StepLog
import StepSync

/// What a person does next about a store error that has a way out, said on
/// the error's line by every command (`CommandLineTool`): a damaged store
/// names `steplog recover` and what recovering costs; a store another process
/// holds names that process and how to stop it.
public enum StoreErrorAdvice {
    public static func nextStep(after error: Error) -> String? {
        switch error as? StepLogError {
        case .corruption(let path, let offset, _)?:
            return damaged(path: path, offset: offset)
        case .locked(_, let pid?)?:
            return "Another process writes it (stepsync ingest or upload, pid \(pid)): let it finish, or stop it with "
                + "kill -INT \(pid) (it pauses at a safe point), then run this again"
        default:
            return nil
        }
    }

    /// The damaged store's way out. When the damage is in a segment, what
    /// `steplog recover` sets aside is known: that segment from `offset` on,
    /// and every later one.
    static func damaged(path: String, offset: Int64) -> String {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        let isSegment = SegmentName.sequence(of: name) != nil
        let store = Directory.kind(of: path) == .directory ? path : Directory.parentPath(of: path)
        var setAside = "everything after it"
        var file = "\(store).salvage-…bin"
        if let sequence = SegmentName.sequence(of: name), let names = try? Directory.names(in: store) {
            var bytes: Int64 = 0, later = 0
            for other in names {
                guard let s = SegmentName.sequence(of: other), s >= sequence,
                      let size = (try? FileManager.default.attributesOfItem(atPath: Directory.join(store, other)))?[.size] as? Int64
                else { continue }
                if s == sequence { bytes += max(0, size - offset) } else { bytes += size; later += 1 }
            }
            setAside = "the \(Format.bytes(bytes)) after it (the rest of \(name)"
                + (later > 0 ? " and \(Format.count(later, "later segment"))" : "") + ")"
            file = "\(store).salvage-\(sequence)-\(offset).bin"
        }
        return "The store is damaged: 'steplog recover \(store)' keeps every record before the damage and sets "
            + "\(setAside) aside in \(file); then 'stepsync ingest' fetches "
            + "again what the source still has, and 'stepsync upload' sends again what the server acknowledged after "
            + "the damage (it takes repeats idempotently)" + (isSegment ? "" : "; 'steplog verify \(store)' lists every problem")
    }
}
