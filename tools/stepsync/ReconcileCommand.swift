import Foundation
import StepSync
import ToolSupport

/// `stepsync reconcile`: the full check that the server holds what the store
/// acknowledged, and the repair (docs/RECONCILE.md).
enum ReconcileCommand {
    static let usage = """
        usage: stepsync reconcile --store DIR [--api-url URL] [--token-file PATH] [--dry-run] [--json] [--timeout SECONDS] [--max-attempts N] [--in-flight N] [--http-client socket|urlsession]

        Compares, day by day, what the server holds of this store's samples with what the store
        acknowledged, whatever the whole-history digest says, and prints what differed: days,
        samples missing at the server, versions different, deletions lost, samples another store
        of the same user wrote later (left alone). Then it corrects the store's acknowledgements
        (durably, before anything is sent), uploads the repairs as `stepsync upload` does, and
        checks again. A run killed at any point is continued by running it again.

        options:
          --store DIR        the StepLog store
          --api-url URL      the API server (default: $STEPSYNC_API_URL, else \(UploadCommand.defaultURL))
          --token-file PATH  a file holding the API token (default: $STEPSYNC_TOKEN)
          --dry-run          compare and report only: nothing is written or sent
          --json             print the summary as JSON (the upload's, with "check" and "reconciles")
          (--timeout, --max-attempts, --in-flight, --http-client as for stepsync upload)
        """

    static func run(_ arguments: [String]) async throws -> Int32 {
        if StepSyncTool.helpRequested(arguments, usage) { return 0 }
        return try await UploadCommand.run(arguments, command: "reconcile", full: true)
    }
}
