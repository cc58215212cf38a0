import Foundation
@testable import StepLog
@testable import StepSync

/// The shared hand-worked cases of docs/TOTALS.md §7 (Tests/Fixtures/totals).
struct TotalsFixture: CustomStringConvertible {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/totals")

    static var all: [TotalsFixture] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasSuffix(".json") }.sorted().map { TotalsFixture(name: $0) }
    }

    let name: String
    var description: String { name }

    var json: [String: Any] {
        let data = FileManager.default.contents(atPath: Self.directory.appendingPathComponent(name).path)!
        return try! JSONSerialization.jsonObject(with: data) as! [String: Any]
    }

    var query: [String: Any] { json["query"] as! [String: Any] }
    var timeZone: String { query["timeZone"] as! String }
    var from: String { query["from"] as! String }
    var to: String { query["to"] as! String }
    var priorityPatterns: [String]? { query["priority"] as? [String] }
    var expected: Any { json["expected"]! }

    var samples: [StepSample] {
        (json["samples"] as! [[String: Any]]).map { s in
            StepSample(id: UUID(uuidString: s["id"] as! String)!,
                       startMilliseconds: ISO8601.parse(s["startDate"] as! String)!,
                       endMilliseconds: ISO8601.parse(s["endDate"] as! String)!,
                       countThousandths: SampleContract.thousandths(ofCount: (s["count"] as! NSNumber).doubleValue)!,
                       sourceBundleId: s["sourceBundleId"] as! String,
                       sourceDeviceName: s["sourceDeviceName"] as? String)
        }
    }
}

/// JSON with sorted keys, so documents compare as values, not as bytes.
func canonicalJSON(_ value: Any) -> String {
    String(decoding: try! JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes]), as: UTF8.self)
}

func canonicalJSON(bytes: [UInt8]) throws -> String {
    canonicalJSON(try JSONSerialization.jsonObject(with: Data(bytes)))
}

/// docs/TOTALS.md §4 transcribed as plainly as possible (quadratic): each day
/// cut at every sample boundary inside it, each segment given to the
/// highest-ranked covering source. The property tests hold the sweep to it.
enum NaiveDailyTotals {
    struct Row: Equatable {
        var merged: [Int64]
        var raw: [Int64]
    }

    static func rows(_ samples: [StepSample], priority: SourcePriority, calendar: LocalDayCalendar,
                     days: ClosedRange<Int64>) -> (sources: [StepSource], rows: [Row]) {
        let sources = priority.ordered(Set(samples.map(StepSource.init(of:))))
        let xs = samples.map { s in (s: s.startMilliseconds, e: s.endMilliseconds, c: s.countThousandths,
                                     k: sources.firstIndex(of: StepSource(of: s))!) }
        // In thousandths: floor(w × p) whole steps and floor(f × p) thousandths of the fraction.
        func f(_ x: (s: Int64, e: Int64, c: Int64, k: Int), _ t: Int64) -> Int64 {
            (x.c / 1000) * (t - x.s) / (x.e - x.s) * 1000 + (x.c % 1000) * (t - x.s) / (x.e - x.s)
        }
        var rows: [Row] = []
        for d in days {
            let ds = calendar.startMilliseconds(ofDay: d), de = calendar.startMilliseconds(ofDay: d + 1)
            var row = Row(merged: Array(repeating: 0, count: sources.count), raw: Array(repeating: 0, count: sources.count))
            var cuts = Set([ds, de])
            for x in xs { for t in [x.s, x.e] where t > ds && t < de { cuts.insert(t) } }
            let sorted = cuts.sorted()
            for (a, b) in zip(sorted, sorted.dropFirst()) where a < b {
                let cover = xs.filter { $0.s < $0.e && $0.s <= a && $0.e >= b }
                guard let winner = cover.map(\.k).min() else { continue }
                for x in cover {
                    let piece = f(x, b) - f(x, a)
                    row.raw[x.k] += piece
                    if x.k == winner { row.merged[x.k] += piece }
                }
            }
            for x in xs where x.s == x.e && x.s >= ds && x.s < de {
                row.raw[x.k] += x.c
                if !xs.contains(where: { $0.k < x.k && $0.s <= x.s && x.s < $0.e }) { row.merged[x.k] += x.c }
            }
            rows.append(row)
        }
        return (sources, rows)
    }
}
