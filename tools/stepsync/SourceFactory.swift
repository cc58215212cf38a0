import Foundation
import StepLog
import StepSync
import ToolSupport

/// Builds the provider a `--source` names.
enum SourceFactory {
    static func provider(for spec: SourceSpec, progress: ProgressLine) throws -> StepDataProvider {
        switch spec {
        case .mock(let configuration):
            return MockStepDataProvider(configuration: configuration)
        case .export(let path):
            throw SourceSpecError("--source \(path): Apple Health exports are not readable yet")
        }
    }
}
