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

/// A sample as the API returns it from `GET /steps` (seed 002's DTO).
public struct StepSampleDTO: Codable, Hashable, Sendable {
    public var id: String
    public var startDate: String
    public var endDate: String
    public var count: Int
    public var sourceBundleId: String
    public var sourceDeviceName: String?
}

/// Response of `GET /steps`.
public struct StepSampleListResponse: Codable, Hashable, Sendable {
    public var samples: [StepSampleDTO]
    public var total: Int
}
