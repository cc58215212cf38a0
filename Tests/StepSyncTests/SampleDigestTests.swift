import Foundation
import StepLog
import Testing
@testable import StepSync

/// The content hash the client and the server both compute (docs/RECONCILE.md):
/// XXH64 against its published values, and each sample of the shared vectors
/// (`Tests/Fixtures/digest/vectors.json`, also read by the server's tests).
@Suite struct SampleDigestTests {
    struct Vectors: Decodable {
        struct Text: Decodable { var input: String; var hash: String }
        struct Vector: Decodable {
            var name: String
            var sample: StepSampleDTO
            var startNs: Int64
            var endNs: Int64
            var day: Int64
            var hash: String
        }
        struct All: Decodable { var count: Int; var digest: String }
        var xxh64: [Text]
        var vectors: [Vector]
        var all: All
    }

    static let vectors: Vectors = {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Fixtures/digest/vectors.json").standardized
        return try! JSONDecoder().decode(Vectors.self, from: Data(contentsOf: path))
    }()

    @Test func xxh64MatchesItsReferenceValues() {
        for text in Self.vectors.xxh64 {
            #expect(SamplesDigest.hex(XXHash64.hash(Array(text.input.utf8))) == text.hash, "\(text.input)")
        }
    }

    @Test func everyLengthUpToThreeStripesHashesDifferently() {
        // Lengths around the 32-byte stripes and the 8-, 4- and 1-byte tails each take another path
        // through the code; the reference values above pin four of them, the 512-byte names of the
        // vectors below the stripes.
        var seen = Set<UInt64>()
        for length in 0...100 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            #expect(seen.insert(XXHash64.hash(bytes)).inserted, "length \(length) collides")
        }
    }

    @Test func contentHashesMatchTheServers() throws {
        var digest = SamplesDigest()
        for vector in Self.vectors.vectors {
            let dto = vector.sample
            let start = try #require(ISO8601.parse(dto.startDate)), end = try #require(ISO8601.parse(dto.endDate))
            #expect(start * 1_000_000 == vector.startNs && end * 1_000_000 == vector.endNs, "\(vector.name)")
            let sample = StepSample(id: try #require(UUID(uuidString: dto.id)), startMilliseconds: start, endMilliseconds: end,
                                    countThousandths: dto.countThousandths, sourceBundleId: dto.sourceBundleId,
                                    sourceDeviceName: dto.sourceDeviceName,
                                    origin: .export)
            #expect(SampleDigest.day(sample) == vector.day, "\(vector.name)")
            let hash = SampleDigest.hash(sample)
            #expect(SamplesDigest.hex(hash) == vector.hash, "\(vector.name)")
            digest.add(hash)
        }
        #expect(digest == SamplesDigest(count: Self.vectors.all.count, hex: Self.vectors.all.digest))
    }

    @Test func theOriginIsNotContent() {
        let sample = StepSample(id: UUID(), startMilliseconds: 1_705_314_600_000, endMilliseconds: 1_705_314_660_000, count: 45,
                                sourceBundleId: "com.apple.health", sourceDeviceName: nil, origin: .mock)
        var other = sample
        other.origin = .live
        #expect(SampleDigest.hash(sample) == SampleDigest.hash(other))
    }

    @Test func digestsAddUpInAnyOrderAndSpellAsTheServerDoes() {
        var forward = SamplesDigest(), backward = SamplesDigest()
        let hashes: [UInt64] = [.max, 1, 0x8000_0000_0000_0000, 42]
        for h in hashes { forward.add(h) }
        for h in hashes.reversed() { backward.add(h) }
        #expect(forward == backward && forward.count == 4)
        #expect(SamplesDigest.hex(forward.sum) == "800000000000002a")
        #expect(SamplesDigest(count: 4, hex: "800000000000002a") == forward)
        #expect(SamplesDigest(count: 1, hex: "12") == nil && SamplesDigest(count: 1, hex: "zz00000000000000") == nil)
    }
}

/// A store's digests are read from its records' bytes on several threads
/// (`StoreDigests.of`); they must be what hashing each sample gives.
@Suite struct StoreDigestsTests {
    @Test(arguments: [1, 2, 4])
    func aStoresDigestsAreItsSamplesHashes(parts: Int) throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path, options: StoreOptions(segmentSize: 16 << 10))
        // The shared vectors (device names null, empty, non-ASCII, 512 bytes, counts with fractions, read
        // from the records' countFraction) and enough mock-like samples
        // to fill several segments, half of them acknowledged, one of them rejected.
        var samples = try SampleDigestTests.vectors.vectors.map { vector in
            let dto = vector.sample
            return StepSample(id: try #require(UUID(uuidString: dto.id)), startMilliseconds: try #require(ISO8601.parse(dto.startDate)),
                              endMilliseconds: try #require(ISO8601.parse(dto.endDate)), countThousandths: dto.countThousandths,
                              sourceBundleId: dto.sourceBundleId, sourceDeviceName: dto.sourceDeviceName, origin: .export)
        }
        samples += (0..<2_000).map { i in
            StepSample(id: UUID(), startMilliseconds: 1_700_000_000_000 + Int64(i) * 3_600_000,
                       endMilliseconds: 1_700_000_060_000 + Int64(i) * 3_600_000, count: i,
                       sourceBundleId: "com.apple.health", sourceDeviceName: i % 3 == 0 ? nil : "iPhone \(i % 7)", origin: .mock)
        }
        try store.upsert(samples, fetchedAt: uploadTestNow)
        var stored: [StoredSample] = []
        try store.forEachSample { stored.append($0) }
        _ = try store.markSynced(stored.enumerated().filter { $0.offset % 2 == 0 }.map(\.element))
        let rejected = stored[3]
        _ = try store.markRejected([(rejected, "test")], at: uploadTestNow)
        #expect(store.counts.segments > parts, "the store spans several segments")

        var expected = StoreDigests()
        try store.forEachSample { sample in
            guard sample.id != rejected.sample.id else { return }
            let hash = SampleDigest.hash(sample.sample), day = SampleDigest.day(sample.sample)
            expected.days[day, default: StoreDigests.Day()].live.add(hash)
            if sample.isSynced { expected.days[day, default: StoreDigests.Day()].acknowledged.add(hash) }
        }
        #expect(try StoreDigests.of(store, parts: parts) == expected)
    }
}

/// The check of every upload computes one total (`StoreDigests.acknowledged`),
/// the reconcile the days (`StoreDigests.of`): two passes over one store that
/// must agree on what it acknowledged, whatever happened to its samples.
@Suite struct AcknowledgedDigestTests {
    @Test(arguments: [1, 2])
    func theChecksTotalAndTheReconcilesDaysAgree(parts: Int) throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path, options: StoreOptions(segmentSize: 16 << 10))
        // 800 samples an hour apart: 34 days, several segments.
        let samples = (0..<800).map { (i: Int) -> StepSample in
            let start: Int64 = 1_700_000_000_000 + Int64(i) * 3_600_000
            let thousandths: Int64 = Int64(i) * 1_000 + Int64(i % 4) * 250
            let device: String? = i % 5 == 0 ? nil : "iPhone"
            return StepSample(id: UUID(), startMilliseconds: start, endMilliseconds: start + 60_000, countThousandths: thousandths,
                              sourceBundleId: "com.apple.health", sourceDeviceName: device, origin: .mock)
        }
        try store.upsert(samples, fetchedAt: uploadTestNow)
        func current(_ i: Int) throws -> StoredSample { try #require(try store.sample(id: samples[i].id)) }
        // Two thirds acknowledged, a third waiting.
        _ = try store.markSynced(try (0..<800).filter { $0 % 3 != 0 }.map(current))
        // Replaced after acknowledgement: one version waiting, one acknowledged again.
        var replaced = [samples[1], samples[2]]
        for i in replaced.indices { replaced[i].countThousandths += 7_000 }
        try store.upsert(replaced, fetchedAt: uploadTestNow)
        _ = try store.markSynced([try current(2)])
        // Deleted: an acknowledged sample and a waiting one.
        _ = try store.delete([samples[4].id, samples[6].id], at: uploadTestNow)
        // Rejected (a waiting sample), and an acknowledged one held back as another uploader's.
        _ = try store.markRejected([(try current(9), "test")], at: uploadTestNow)
        _ = try store.unacknowledge([(try current(10), "another uploader's")], at: uploadTestNow)

        // What the server holds when in sync: each acknowledged live version, hashed from its sample.
        let rejected = Set(try store.rejectedSamples().map(\.sample.id))
        var server: [Int64: SamplesDigest] = [:]
        var acknowledgedDays = Set<Int64>()
        try store.forEachSample { stored in
            guard stored.isSynced, !rejected.contains(stored.id) else { return }
            server[SampleDigest.day(stored.sample), default: SamplesDigest()].add(SampleDigest.hash(stored.sample))
            acknowledgedDays.insert(SampleDigest.day(stored.sample))
        }
        let total = server.values.reduce(into: SamplesDigest()) { $0.add($1) }
        #expect(total.count == 530, "533 of 800 acknowledged, less one replaced (waiting again), one deleted, one held back")
        #expect(rejected == [samples[9].id, samples[10].id])
        #expect(acknowledgedDays.count > 30)

        let check = try StoreDigests.acknowledged(of: store, parts: parts)
        let days = try StoreDigests.of(store, parts: parts)
        #expect(check == total && days.acknowledged == total)
        #expect(days.days.filter { $0.value.acknowledged.count > 0 }.mapValues(\.acknowledged) == server)

        // The server lost one acknowledged version (its count changed behind the API's back): the
        // check's total differs, and of the days exactly that sample's does.
        var damaged = try current(13).sample
        let day = SampleDigest.day(damaged)
        var tampered = server[day]!
        tampered.sum = tampered.sum &- SampleDigest.hash(damaged)
        damaged.countThousandths += 1_000
        tampered.sum = tampered.sum &+ SampleDigest.hash(damaged)
        server[day] = tampered
        #expect(server.values.reduce(into: SamplesDigest()) { $0.add($1) } != check)
        #expect(Set(days.days.filter { $0.value.acknowledged.count > 0 && server[$0.key] != $0.value.acknowledged }.keys) == [day])
    }
}
