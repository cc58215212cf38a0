#!/usr/bin/env python3
"""Writes the seeds of the export-xml and zip fuzz targets into Tests/Fuzz/corpus/.

Each seed starts with the target's mode byte (the piece or read size), then the
input. Real export fragments come from Tests/StepSyncTests/Fixtures/apple-health
(third-party, Apache-2.0 and MIT: see Tests/Fuzz/corpus/README.md). The HTTP
seeds are small files written by hand.
"""
import io
import pathlib
import zipfile

root = pathlib.Path(__file__).resolve().parent
fixtures = root.parent / "StepSyncTests" / "Fixtures" / "apple-health"
corpus = root / "corpus"

dogsheep = (fixtures / "dogsheep-healthkit-to-sqlite_tests_export.xml").read_bytes()
dtd = (fixtures / "aleksi-applehealth_healthkit11.dtd").read_bytes()

synthetic = b"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE HealthData [
<!ELEMENT HealthData (ExportDate,Me,(Record|Correlation|Workout)*)>
<!ATTLIST HealthData locale CDATA #REQUIRED>
]>
<HealthData locale="en_US">
 <ExportDate value="2024-03-01 09:00:00 +0100"/>
 <Me HKCharacteristicTypeIdentifierBiologicalSex="HKBiologicalSexNotSet"/>
 <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Simon\xe2\x80\x99s iPhone" sourceVersion="17.2" device="&lt;&lt;HKDevice: 0x281a&gt;, name:iPhone, manufacturer:Apple Inc., model:iPhone, hardware:iPhone15,2, software:17.2&gt;" unit="count" creationDate="2024-02-28 08:10:00 +0100" startDate="2024-02-28 08:00:00 +0100" endDate="2024-02-28 08:09:30 +0100" value="812"/>
 <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Apple\xc2\xa0Watch" unit="count" startDate="2024-02-28 08:00:00 +0100" endDate="2024-02-28 08:05:00 +0100" value="400">
  <MetadataEntry key="HKMetadataKeySyncIdentifier" value="A1B2-77"/>
  <MetadataEntry key="HKMetadataKeySyncVersion" value="2"/>
 </Record>
 <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Apple\xc2\xa0Watch" unit="count" startDate="2024-02-28 08:00:00 +0100" endDate="2024-02-28 08:05:00 +0100" value="380">
  <MetadataEntry key="HKMetadataKeySyncIdentifier" value="A1B2-77"/>
  <MetadataEntry key="HKMetadataKeySyncVersion" value="1"/>
 </Record>
 <!-- a comment with <Record> inside -->
 <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Bad" unit="count" startDate="2024-02-30 08:00:00 +0100" endDate="x" value="-3"/>
 <Correlation type="HKCorrelationTypeIdentifierFood" startDate="2024-02-28 12:00:00 +0100" endDate="2024-02-28 12:00:00 +0100">
  <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Nested" unit="count" startDate="2024-02-28 12:00:00 +0100" endDate="2024-02-28 12:01:00 +0100" value="5"/>
 </Correlation>
 <Workout workoutActivityType="HKWorkoutActivityTypeWalking" duration="30"><![CDATA[ <not a tag> ]]><?pi data?></Workout>
 <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Future" unit="count" startDate="2099-01-01 00:00:00 +0000" endDate="2099-01-01 00:01:00 +0000" value="12"/>
</HealthData>
<!-- trailing comment -->
"""

with_dtd = b'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE HealthData [\n' + dtd + b']>\n' + dogsheep
# iOS 8's format (source=, compact dates, metadata keys with spaces as attributes): synthetic, Tests/Fixtures/export-eras.
ios8 = (root.parent / "Fixtures" / "export-eras" / "ios8-2014.xml").read_bytes()

xml_seeds = {
    "dogsheep-fragment": (0, dogsheep),
    "dogsheep-with-dtd": (3, with_dtd),
    "synthetic-steps": (1, synthetic),
    "synthetic-steps-bom-crlf": (7, b"\xef\xbb\xbf" + synthetic.replace(b"\n", b"\r\n")),
    "synthetic-cut": (2, synthetic[: len(synthetic) * 2 // 3]),
    "ios8-era": (4, ios8),
}
(corpus / "export-xml").mkdir(parents=True, exist_ok=True)
for name, (mode, data) in xml_seeds.items():
    (corpus / "export-xml" / name).write_bytes(bytes([mode]) + data)


def export_zip(export: bytes, zip64: bool = False, stored: bool = False) -> bytes:
    out = io.BytesIO()
    method = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(out, "w", compression=method) as z:
        z.writestr("apple_health_export/", b"")
        with z.open("apple_health_export/export.xml", "w", force_zip64=zip64) as f:
            f.write(export)
        z.writestr("apple_health_export/export_cda.xml", b'<?xml version="1.0"?><ClinicalDocument/>', compress_type=zipfile.ZIP_STORED)
        z.writestr("apple_health_export/workout-routes/route_1.gpx", b"<gpx></gpx>")
        z.writestr("apple_health_export/electrocardiograms/ecg.xml", b"<HealthData/>")
    return out.getvalue()


def two_exports() -> bytes:
    """Two exports zipped together, the older one larger: the newest ExportDate is read."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("older/apple_health_export/export.xml", (2024, 1, 1, 0, 0, 0)),
                   synthetic.replace(b"2024-03-01 09:00:00", b"2023-03-01 09:00:00") + b"<!-- " + b"x" * 400 + b" -->\n")
        z.writestr(zipfile.ZipInfo("apple_health_export/export.xml", (2024, 3, 1, 0, 0, 0)), synthetic)
    return out.getvalue()


zip_seeds = {
    "export-deflated": (0, export_zip(synthetic)),
    "export-stored": (1, export_zip(synthetic, stored=True)),
    "export-zip64": (2, export_zip(dogsheep, zip64=True)),
    "export-localized-name": (3, export_zip(synthetic).replace(b"export.xml", b"eksport.xm")),
    "two-exports": (4, two_exports()),
}
(corpus / "zip").mkdir(parents=True, exist_ok=True)
for name, (mode, data) in zip_seeds.items():
    (corpus / "zip" / name).write_bytes(bytes([mode]) + data)
print("wrote", len(xml_seeds), "export-xml and", len(zip_seeds), "zip seeds")
