import Foundation

/// Response of `POST /steps`.
public struct StepSampleResponse: Codable, Hashable, Sendable {
    public var saved: Int
    public var message: String

    public init(saved: Int, message: String) {
        self.saved = saved
        self.message = message
    }
}

/// Response of `POST /steps/deletions`: how many of the ids were live.
public struct DeletionResponse: Codable, Hashable, Sendable {
    public var deleted: Int
    public var message: String

    public init(deleted: Int, message: String) {
        self.deleted = deleted
        self.message = message
    }
}

/// A sample as the API returns it from `GET /steps` (seed 002's DTO). Its
/// `count` is a JSON number with up to three decimals, kept here in thousandths.
public struct StepSampleDTO: Codable, Hashable, Sendable {
    public var id: String
    public var startDate: String
    public var endDate: String
    public var countThousandths: Int64
    public var sourceBundleId: String
    public var sourceDeviceName: String?

    public init(id: String, startDate: String, endDate: String, countThousandths: Int64, sourceBundleId: String,
                sourceDeviceName: String?) {
        self.id = id
        self.startDate = startDate
        self.endDate = endDate
        self.countThousandths = countThousandths
        self.sourceBundleId = sourceBundleId
        self.sourceDeviceName = sourceDeviceName
    }

    /// The whole steps of the count (its fraction dropped).
    public var count: Int { Int(countThousandths / 1000) }

    private enum CodingKeys: String, CodingKey {
        case id, startDate, endDate, count, sourceBundleId, sourceDeviceName
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        startDate = try c.decode(String.self, forKey: .startDate)
        endDate = try c.decode(String.self, forKey: .endDate)
        let count = try c.decode(Double.self, forKey: .count)
        guard let thousandths = SampleContract.thousandths(ofCount: count) else {
            throw DecodingError.dataCorruptedError(forKey: .count, in: c, debugDescription: "count \(count) has more than three decimals")
        }
        countThousandths = thousandths
        sourceBundleId = try c.decode(String.self, forKey: .sourceBundleId)
        sourceDeviceName = try c.decodeIfPresent(String.self, forKey: .sourceDeviceName)
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(startDate, forKey: .startDate)
        try c.encode(endDate, forKey: .endDate)
        if countThousandths % 1000 == 0 {
            try c.encode(countThousandths / 1000, forKey: .count)
        } else {
            try c.encode(Decimal(countThousandths) / 1000, forKey: .count)
        }
        try c.encode(sourceBundleId, forKey: .sourceBundleId)
        try c.encode(sourceDeviceName, forKey: .sourceDeviceName)
    }
}

/// Response of `GET /steps`.
public struct StepSampleListResponse: Codable, Hashable, Sendable {
    public var samples: [StepSampleDTO]
    public var total: Int
}

/// Response of `GET /steps/digest?uploader=`: who answers, and the digest of
/// the live samples that uploader last wrote there (docs/RECONCILE.md).
public struct UploaderDigestResponse: Codable, Hashable, Sendable {
    /// Random, made with the server's database (a restored backup keeps it).
    public var serverId: String
    /// The user the token belongs to.
    public var user: String
    public var uploader: String
    public var count: Int
    /// The sum of their content hashes mod 2^64, 16 hex digits.
    public var digest: String
    public var days: Int

    public init(serverId: String, user: String, uploader: String, count: Int, digest: String, days: Int) {
        self.serverId = serverId
        self.user = user
        self.uploader = uploader
        self.count = count
        self.digest = digest
        self.days = days
    }
}

/// One UTC day of `GET /steps/digest/days`.
public struct DayDigestDTO: Codable, Hashable, Sendable {
    public var day: String
    public var count: Int
    public var digest: String

    public init(day: String, count: Int, digest: String) {
        self.day = day
        self.count = count
        self.digest = digest
    }
}

/// Response of `GET /steps/digest/days`: days in order; `next` is the next page's `after`.
public struct DayDigestsPage: Codable, Hashable, Sendable {
    public var days: [DayDigestDTO]
    public var next: String?

    public init(days: [DayDigestDTO], next: String?) {
        self.days = days
        self.next = next
    }
}

/// A sample's id and content hash (`GET /steps/digest/samples`).
public struct SampleHashDTO: Codable, Hashable, Sendable {
    public var id: String
    public var hash: String

    public init(id: String, hash: String) {
        self.id = id
        self.hash = hash
    }
}

/// Response of `GET /steps/digest/samples`: ids in order; `next` is the next page's `after`.
public struct DaySamplesPage: Codable, Hashable, Sendable {
    public var samples: [SampleHashDTO]
    public var next: String?

    public init(samples: [SampleHashDTO], next: String?) {
        self.samples = samples
        self.next = next
    }
}

/// What the server knows of one id (`POST /steps/digest/lookup`): `live`
/// (written by `uploader`, on `day`, with content `hash`) or `deleted` (by `uploader`).
public struct LookupEntryDTO: Codable, Hashable, Sendable {
    public var id: String
    public var state: String
    public var uploader: String
    public var day: String?
    public var hash: String?

    public init(id: String, state: String, uploader: String, day: String? = nil, hash: String? = nil) {
        self.id = id
        self.state = state
        self.uploader = uploader
        self.day = day
        self.hash = hash
    }
}

/// Response of `POST /steps/digest/lookup`: the ids the server knows, in id order.
public struct LookupResponse: Codable, Hashable, Sendable {
    public var samples: [LookupEntryDTO]

    public init(samples: [LookupEntryDTO]) {
        self.samples = samples
    }
}
