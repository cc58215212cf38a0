// swift-tools-version:6.0
//
// StepLog / StepSync. No package dependencies by design: only the toolchain
// (Foundation, Dispatch, Glibc/Darwin, Swift Testing) and zlib, which every
// Linux and Apple system ships, through a system-library target.
import PackageDescription

let package = Package(
    name: "StepLog",
    platforms: [.macOS(.v13), .iOS(.v16)],
    products: [
        .library(name: "StepLog", targets: ["StepLog"]),
        .library(name: "StepSync", targets: ["StepSync"]),
        .executable(name: "steplog", targets: ["steplog"]),
        .executable(name: "stepsync", targets: ["stepsync"]),
        .executable(name: "stepbench", targets: ["stepbench"]),
        .executable(name: "crashcheck", targets: ["crashcheck"]),
    ],
    targets: [
        // Layer 0: the few hot loops that need CPU instructions Swift cannot name
        // (hardware CRC32C, prefetch). Plain C, no dependencies.
        .target(name: "CStepLogSupport", path: "Sources/CStepLogSupport"),
        // zlib, as shipped by the system (libz), for reading export.zip in place.
        .systemLibrary(name: "CZlib", path: "Sources/CZlib"),

        // Layer 1: the storage engine.
        .target(name: "StepLog", dependencies: ["CStepLogSupport"], path: "Sources/StepLog"),
        // Layer 2: the pipeline (providers, layering, fetch, upload, today).
        .target(name: "StepSync", dependencies: ["StepLog", "CZlib", "CStepLogSupport"], path: "Sources/StepSync"),

        // Layer 3: command-line tools (sources under tools/, as the design card asks),
        // sharing argument parsing, buffered output, progress lines and signals.
        .target(name: "ToolSupport", dependencies: ["StepSync"], path: "tools/common"),
        .executableTarget(name: "steplog", dependencies: ["StepLog", "ToolSupport"], path: "tools/steplog"),
        .executableTarget(name: "stepsync", dependencies: ["StepSync", "StepLog", "ToolSupport"], path: "tools/stepsync"),
        .executableTarget(name: "stepbench", dependencies: ["StepSync", "StepLog", "ToolSupport", "CZlib", "StepTestSupport"],
                          path: "tools/stepbench"),

        // The crash-consistency checker's large run (power-loss states, error injection).
        .executableTarget(name: "crashcheck", dependencies: ["StepLog", "StepTestSupport", "ToolSupport"], path: "tools/crashcheck"),

        // A fixture program the SIGKILL tests start and kill.
        .executableTarget(name: "steplog-crash-writer", dependencies: ["StepLog"], path: "Tests/CrashWriter"),
        // A fixture program that deletes or changes samples in a store, for the
        // end-to-end deletion tests and the upload benchmark.
        .executableTarget(name: "stepsync-store-fixture", dependencies: ["StepLog"], path: "Tests/StoreFixture"),
        // Helpers shared by the test targets (temporary directories, child processes) and,
        // for synthetic exports (the generator and the zip writer), by stepbench.
        .target(name: "StepTestSupport", dependencies: ["StepLog", "StepSync", "CZlib"], path: "Tests/Support"),
        .testTarget(name: "StepLogTests", dependencies: ["StepLog", "StepTestSupport", "steplog-crash-writer", "steplog"],
                    path: "Tests/StepLogTests"),
        .testTarget(name: "StepSyncTests", dependencies: ["StepSync", "StepLog", "StepTestSupport", "stepsync", "stepsync-store-fixture", "CZlib"], path: "Tests/StepSyncTests",
                    exclude: ["Fixtures"]),
    ]
)
