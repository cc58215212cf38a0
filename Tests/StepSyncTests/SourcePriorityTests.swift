import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// Sources and their priority (docs/TOTALS.md §1–2).
@Suite struct SourcePriorityTests {
    func source(_ bundle: String, _ device: String?) -> StepSource { StepSource(bundleId: bundle, deviceName: device) }

    @Test func theDefaultRanksAsAppleDocumentsIt() {
        let p = SourcePriority.default
        #expect(p.patterns == ["=Health", "=com.apple.Health", "Apple Watch", "iPhone", "iPod"])
        #expect(p.rank(of: source("Health", nil)) == 0)                                   // entered by hand (export)
        #expect(p.rank(of: source("com.apple.Health", nil)) == 1)                         // entered by hand (HealthKit)
        #expect(p.rank(of: source("Simon\u{2019}s Apple\u{00A0}Watch", "Apple Watch")) == 2) // export, NBSP inside
        #expect(p.rank(of: source("com.apple.health.1A2B3C4D", "Apple Watch")) == 2)      // HealthKit: the device names it
        #expect(p.rank(of: source("Simon\u{2019}s iPhone", "iPhone")) == 3)
        #expect(p.rank(of: source("com.apple.health.mock", "Mock iPhone")) == 3)
        #expect(p.rank(of: source("Jane\u{2019}s iPod touch", nil)) == 4)
        // Third parties: an app on the iPhone is named by the app, not the phone.
        #expect(p.rank(of: source("Pedometer++", "iPhone")) == 5)
        #expect(p.rank(of: source("com.example.pedometer", "iPhone")) == 5)
        #expect(p.rank(of: source("Health Mate", nil)) == 5)                              // "=Health" is exact
        #expect(p.rank(of: source("Galaxy Watch", "Galaxy Watch")) == 5)
        #expect(p.rank(of: source("com.apple.health.1A2B3C4D", nil)) == 5)                // no device: its bundle id
    }

    @Test func patternsMatchAfterNormalizingOnly() throws {
        let p = try SourcePriority(patterns: ["=SIMON'S APPLE WATCH", "phone"])
        #expect(p.rank(of: source("Simon\u{2019}s Apple\u{00A0}Watch", nil)) == 0)       // ’ → ', NBSP → space, ASCII case
        #expect(p.rank(of: source("Simon\u{2019}s Apple\u{00A0}Watch Ultra", nil)) == 1 + 1) // exact: no
        #expect(p.rank(of: source("Simon\u{2019}s iPhone", nil)) == 1)
        let accents = try SourcePriority(patterns: ["\u{00C9}TIENNE"])
        #expect(accents.rank(of: source("\u{00E9}tienne\u{2019}s phone", nil)) == 1)        // no Unicode case folding
        #expect(accents.rank(of: source("\u{00C9}TIENNE", nil)) == 0)
    }

    @Test func listsAndFiles() throws {
        #expect(try SourcePriority(list: " Apple Watch ,\tiPhone ").patterns == ["Apple Watch", "iPhone"])
        #expect(try SourcePriority(fileText: "# mine first\r\n=Health\r\n\n  Apple Watch, Series 9  \niPhone").patterns
                == ["=Health", "Apple Watch, Series 9", "iPhone"])
        for bad in ["", "Apple Watch,,iPhone", " , ", "=", "iPhone,"] {
            #expect(throws: SourcePriorityError.self, "\(bad)") { try SourcePriority(list: bad) }
        }
        #expect(throws: SourcePriorityError.self) { try SourcePriority(fileText: "# nothing\n\n") }
    }

    @Test func equalRanksOrderByBytesAndSourcesAreBytes() {
        let p = SourcePriority.default
        let ordered = p.ordered([source("b", "x"), source("a", "y"), source("a", nil), source("Simon\u{2019}s iPhone", "iPhone"),
                                 source("Health", nil), source("a", "x")])
        #expect(ordered == [source("Health", nil), source("Simon\u{2019}s iPhone", "iPhone"), source("a", nil), source("a", "x"),
                            source("a", "y"), source("b", "x")])
        // "é" precomposed and decomposed: equal to Swift's String ==, two sources here, as in Python.
        let composed = source("Caf\u{00E9}", nil), decomposed = source("Cafe\u{0301}", nil)
        #expect(composed != decomposed && Set([composed, decomposed]).count == 2)
        #expect(source("a", "") != source("a", nil))
        let table = SampleTable([composed, decomposed, composed].enumerated().map { i, s in
            StepSample(id: DerivedUUID.make(7, UInt64(i)), startMilliseconds: 0, endMilliseconds: 1, count: 1,
                       sourceBundleId: s.bundleId, sourceDeviceName: s.deviceName)
        })
        #expect(table.sources.count == 2 && table.entries.map(\.source) == [0, 1, 0])
        #expect(source("com.apple.health.mock", "Mock iPhone").label == "com.apple.health.mock (Mock iPhone)")
        #expect(source("Health", nil).label == "Health" && source("Health", "").label == "Health")
    }
}
