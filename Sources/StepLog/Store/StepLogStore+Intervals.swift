import Foundation

extension StepLogStore {
    /// Records the current status of intervals (one record each). Durable after
    /// the next `sync()`.
    public func recordIntervals<C: Collection>(_ intervals: C) throws where C.Element == SyncInterval {
        try locked {
            for interval in intervals {
                let position = try append { IntervalStatusPayload.append(interval, to: $0) }
                state.intervals.apply(interval, at: position)
            }
        }
    }

    /// Forgets every interval and layering range (the seeds' `clearAllIntervals`).
    public func clearIntervals(at date: Date = Date()) throws {
        try locked {
            _ = try append { IntervalsClearedPayload.append(atMilliseconds: Milliseconds.from(date), to: $0) }
            state.intervals.clear()
        }
    }

    /// Records a range the layering sets out to cover.
    public func recordLayeringRange(_ range: LayeringRange) throws {
        try locked {
            let position = try append { LayeringRangePayload.append(range, to: $0) }
            state.intervals.applyRange(range, at: position)
        }
    }

    /// Every interval with the position of its status record, in time order.
    public func intervalEntries() -> [IntervalTable.Entry] {
        locked { state.intervals.sortedEntries() }
    }

    /// Intervals in time order, optionally only those with `status`.
    public func intervals(status: IntervalStatus? = nil) -> [SyncInterval] {
        intervalEntries().lazy.map(\.interval).filter { status == nil || $0.status == status }
    }

    /// The interval with this id.
    public func interval(id: UUID) -> SyncInterval? {
        locked { state.intervals.entry(id: id)?.interval }
    }

    public var layeringRanges: [LayeringRange] { locked { state.intervals.ranges } }

    // MARK: Daily high scores

    /// Records a new high score for a day (the latest record per day wins).
    public func recordHighScore(_ score: DailyHighScore) throws {
        try locked {
            let position = try append { DailyHighScorePayload.append(score, to: $0) }
            state.setHighScore(score, at: position)
        }
    }

    public func highScore(day: UInt32) -> DailyHighScore? { locked { state.highScores[day] } }

    public var highScores: [DailyHighScore] { locked { state.highScores.values.sorted { $0.day < $1.day } } }
}
