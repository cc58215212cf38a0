import StepLog

/// A sample in the API's JSON shape (seed 002's `StepSampleDTO`):
/// {"id","startDate","endDate","count","sourceBundleId","sourceDeviceName"},
/// id as the uppercase UUID string, dates ISO 8601 UTC with `Z`, count an
/// integer when whole, else with up to three decimals (`2741.7`). `stepsync
/// export`, the upload's request bodies and the server's JSONL all use it.
public enum SampleJSON {
    public static func write(_ s: StepSample, into w: inout JSONWriter) {
        w.beginObject()
        w.field("id", s.id.uuidString)
        w.key("startDate"); w.timestamp(milliseconds: s.startMilliseconds)
        w.key("endDate"); w.timestamp(milliseconds: s.endMilliseconds)
        w.key("count"); w.stepCount(thousandths: s.countThousandths)
        w.field("sourceBundleId", s.sourceBundleId)
        w.field("sourceDeviceName", s.sourceDeviceName)
        w.endObject()
    }

    public static func encode(_ s: StepSample) -> [UInt8] {
        var w = JSONWriter(capacity: 200)
        write(s, into: &w)
        return w.bytes
    }
}
