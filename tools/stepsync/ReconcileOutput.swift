import Foundation
import StepLog
import StepSync
import ToolSupport

/// How `stepsync upload` and `stepsync reconcile` say what the check and the
/// reconciles found: the `check` and `reconciles` of `--json`, and lines.
enum ReconcileOutput {
    static func write(_ result: CheckedUploadSummary, uploader: UUID, into w: inout JSONWriter) {
        w.key("check"); w.beginObject()
        w.field("serverId", result.serverId)
        w.field("user", result.user)
        w.field("uploader", uploader.uuidString)
        w.field("provenEqual", result.provenEqual)
        w.field("unchecked", result.unchecked)
        w.field("requests", result.checkRequests)
        w.key("seconds"); w.value(result.checkSeconds)
        w.key("storeSeconds"); w.value(result.checkStoreSeconds)
        w.key("requestSeconds"); w.value(result.checkRequestSeconds)
        w.endObject()
        w.key("reconciles"); w.beginArray()
        for r in result.reconciles {
            w.beginObject()
            w.field("newDestination", r.newDestination)
            w.field("dryRun", r.dryRun)
            w.field("daysCompared", r.daysCompared)
            w.field("daysDiffering", r.daysDiffering)
            w.key("firstDifferingDays"); w.beginArray()
            for day in r.firstDifferingDays { w.value(day) }
            w.endArray()
            w.field("samplesMissing", r.samplesMissing)
            w.field("versionsDifferent", r.versionsDifferent)
            w.field("deletionsLost", r.deletionsLost)
            w.field("heldByAnotherUploader", r.heldByAnotherUploader)
            w.field("acknowledged", r.acknowledged)
            w.field("rejectedWithOlderVersionKept", r.rejectedWithOlderVersionKept)
            w.field("requests", r.requests)
            w.endObject()
        }
        w.endArray()
    }

    /// The lines of the text summary.
    static func lines(_ result: CheckedUploadSummary, acknowledged: Int) -> [String] {
        var lines: [String] = []
        for r in result.reconciles {
            let verb = r.dryRun ? "would be" : "were"
            var found = "\(Format.count(r.daysDiffering)) of \(Format.count(r.daysCompared)) days differed"
            if !r.firstDifferingDays.isEmpty {
                found += " (" + r.firstDifferingDays.joined(separator: ", ") + (r.daysDiffering > r.firstDifferingDays.count ? ", …" : "") + ")"
            }
            lines.append((r.newDestination ? "new destination: " : "reconciled: ") + found)
            guard r.corrections > 0 || r.rejectedWithOlderVersionKept > 0 else { continue }
            lines.append("  \(Format.count(r.samplesMissing)) samples missing and \(Format.count(r.versionsDifferent)) in another version at the server (\(verb) sent again), \(Format.count(r.deletionsLost)) deletions lost (\(verb) sent again), \(Format.count(r.heldByAnotherUploader)) written later by another uploader (left alone), \(Format.count(r.acknowledged)) held but not marked (\(verb) marked acknowledged)")
            if r.rejectedWithOlderVersionKept > 0 {
                lines.append("  \(Format.count(r.rejectedWithOlderVersionKept)) samples the server rejected keep an older version there (not repairable: see stepsync status)")
            }
        }
        if result.unchecked {
            lines.append("server: not checked (it has no GET /steps/digest)")
            return lines
        }
        let server = "server \(result.serverId) (user \(result.user))"
        lines.append(result.provenEqual
            ? "\(server): holds exactly the \(Format.count(acknowledged)) samples acknowledged (checked with \(Format.count(result.checkRequests, "request")), \(Format.duration(result.checkSeconds)))"
            : "\(server): does not hold what the store acknowledged")
        return lines
    }
}
