extension DailyTotals {
    /// The document of docs/TOTALS.md §5, which `GET /steps/daily` answers too:
    /// {"timeZone","from","to","priority","days":[{"date","merged","raw"[,"sources"]}]}.
    /// `from`/`to` are null when the range has no days.
    public func writeJSON(bySource: Bool, into w: inout JSONWriter) {
        w.beginObject()
        w.field("timeZone", timeZone)
        w.field("from", dayCount > 0 ? LocalDayCalendar.format(day: firstDay) : nil)
        w.field("to", dayCount > 0 ? LocalDayCalendar.format(day: firstDay + Int64(dayCount) - 1) : nil)
        w.key("priority")
        w.beginArray()
        for p in priority.patterns { w.value(p) }
        w.endArray()
        w.key("days")
        w.beginArray()
        for i in 0..<dayCount {
            let d = day(i)
            w.beginObject()
            w.field("date", d.date)
            w.field("merged", d.merged)
            w.field("raw", d.raw)
            if bySource {
                w.key("sources")
                w.beginArray()
                for s in d.sources {
                    w.beginObject()
                    w.field("bundleId", s.source.bundleId)
                    w.field("deviceName", s.source.deviceName)
                    w.field("merged", s.merged)
                    w.field("raw", s.raw)
                    w.endObject()
                }
                w.endArray()
            }
            w.endObject()
        }
        w.endArray()
        w.endObject()
    }

    /// The document as one line of UTF-8.
    public func json(bySource: Bool) -> [UInt8] {
        var w = JSONWriter(capacity: 64 + dayCount * (bySource ? 200 : 48))
        writeJSON(bySource: bySource, into: &w)
        return w.bytes
    }
}
