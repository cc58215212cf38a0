import Foundation
import StepLog

/// The UUID of an export record, which has none of its own: an RFC 9562
/// version 8 UUID whose other 122 bits come from `MurmurHash3x64` over the
/// record's identity fields. Same fields, same UUID — so importing the same
/// export twice, or a newer export that re-prints the old records, upserts
/// instead of duplicating. docs/EXPORT.md gives the derivation; never change
/// it (stored and uploaded samples carry these ids).
///
/// The hashed bytes are the namespace and then, in this order, the fields
/// `type, sourceName, sourceVersion, device (address removed), unit,
/// creationDate, startDate, endDate, value`, each written as a u32
/// little-endian byte length followed by its bytes, or as the u32 0xFFFFFFFF
/// alone when the attribute is absent. Text fields are the attribute values
/// after entity decoding; the three dates are the absolute instants as i64
/// little-endian milliseconds (8 bytes), not their text: a newer export may
/// print the same instant with another UTC offset.
///
/// A record with `MetadataEntry` children appends a metadata section: the
/// field "metadata", the u32 number of entries, then each entry's key and
/// value fields, sorted by (key, value). A record without any keeps exactly
/// the bytes, and so the UUID, it had before metadata counted.
enum ExportRecordIdentity {
    static let namespace = "steplog-export-v1"
    static let absent: UInt32 = 0xFFFF_FFFF
    /// The field that opens the metadata section.
    static let metadataMarker: StaticString = "metadata"
    /// The namespace as the first field: its u32 length, then its bytes.
    private static let namespaceField: [UInt8] = {
        let utf8 = Array(namespace.utf8)
        return withUnsafeBytes(of: UInt32(utf8.count).littleEndian) { Array($0) } + utf8
    }()

    /// Identity bytes of one record, built in a reused buffer.
    struct Encoder {
        private(set) var bytes: [UInt8] = []

        init() { bytes.reserveCapacity(1024) }

        mutating func start() {
            bytes.removeAll(keepingCapacity: true)
            bytes.append(contentsOf: ExportRecordIdentity.namespaceField)
        }

        mutating func text(_ field: UnsafeBufferPointer<UInt8>?) {
            guard let field else { return length(absent) }
            length(UInt32(field.count))
            bytes.append(contentsOf: field)
        }

        /// The metadata section; write it only for a record that has entries.
        mutating func metadata(_ metadata: ExportRecordMetadata) {
            ExportRecordIdentity.metadataMarker.withUTF8Buffer { text($0) }
            length(UInt32(metadata.entries.count))
            metadata.bytes.withUnsafeBufferPointer { all in
                for entry in metadata.sortedEntries() {
                    text(entry.key.map { UnsafeBufferPointer(rebasing: all[$0]) })
                    text(entry.value.map { UnsafeBufferPointer(rebasing: all[$0]) })
                }
            }
        }

        mutating func instant(_ milliseconds: Int64?) {
            guard let milliseconds else { return length(absent) }
            length(8)
            withUnsafeBytes(of: milliseconds.littleEndian) { bytes.append(contentsOf: $0) }
        }

        private mutating func length(_ value: UInt32) {
            withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
        }

        /// The version 8 UUID of the bytes written since `start()`.
        func uuid() -> UUIDBytes { ExportRecordIdentity.uuid(hashing: bytes) }
    }

    /// The 128-bit digest with the version (8) and variant (0b10) bits set.
    static func uuid(hashing bytes: [UInt8]) -> UUIDBytes {
        let (h1, h2) = MurmurHash3x64.hash(bytes)
        return UUIDBytes(high: (h1 & ~0xF000) | 0x8000,
                         low: (h2 & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000)
    }

    /// The UUID of a record given its decoded attribute values (`device` as
    /// written, address included: it is removed here) and parsed instants.
    /// The scanner computes the same thing from the bytes in the file.
    static func uuid(type: String, sourceName: String?, sourceVersion: String?, device: String?, unit: String?,
                     creationDate: Int64?, startDate: Int64, endDate: Int64, value: String?,
                     metadata: [(key: String?, value: String?)] = []) -> UUID {
        var encoder = Encoder()
        encoder.start()
        func text(_ string: String?) {
            guard let string else { return encoder.text(nil) }
            let utf8 = Array(string.utf8)
            utf8.withUnsafeBufferPointer { encoder.text($0) }
        }
        text(type)
        text(sourceName)
        text(sourceVersion)
        if let device {
            var stripped: [UInt8] = []
            Array(device.utf8).withUnsafeBufferPointer { ExportDeviceString.withoutAddress($0, into: &stripped) }
            stripped.withUnsafeBufferPointer { encoder.text($0) }
        } else {
            encoder.text(nil)
        }
        text(unit)
        encoder.instant(creationDate)
        encoder.instant(startDate)
        encoder.instant(endDate)
        text(value)
        if !metadata.isEmpty {
            var entries = ExportRecordMetadata()
            for (key, value) in metadata {
                entries.appendDecoded(key: key.map { Array($0.utf8) }, value: value.map { Array($0.utf8) })
            }
            encoder.metadata(entries)
        }
        return encoder.uuid().uuid
    }
}

