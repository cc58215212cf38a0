/// What a synthetic Apple Health export is made of, shared by the tests and
/// `stepbench export generate`: the iOS 16 DTD exactly as Apple shipped it,
/// the document head, and the small side files of a real export.zip.
public enum SyntheticExport {
    /// The iOS 16 ("HealthKit Export Version: 12") inline DTD as Apple
    /// shipped it: the VisionPrescription, RightEye and LeftEye ATTLISTs are
    /// never closed, which makes strict XML parsers fail.
    public static let iOS16DTD = """
        <!DOCTYPE HealthData [
        <!-- HealthKit Export Version: 12 -->
        <!ELEMENT HealthData (ExportDate,Me,(Record|Correlation|Workout|ActivitySummary|ClinicalRecord|Audiogram|VisionPrescription)*)>
        <!ATTLIST HealthData
          locale CDATA #REQUIRED
        >
        <!ELEMENT ExportDate EMPTY>
        <!ATTLIST ExportDate
          value CDATA #REQUIRED
        >
        <!ELEMENT Me EMPTY>
        <!ATTLIST Me
          HKCharacteristicTypeIdentifierDateOfBirth         CDATA #REQUIRED
          HKCharacteristicTypeIdentifierBiologicalSex       CDATA #REQUIRED
          HKCharacteristicTypeIdentifierBloodType           CDATA #REQUIRED
          HKCharacteristicTypeIdentifierFitzpatrickSkinType CDATA #REQUIRED
          HKCharacteristicTypeIdentifierCardioFitnessMedicationsUse CDATA #REQUIRED
        >
        <!ELEMENT Record ((MetadataEntry|HeartRateVariabilityMetadataList)*)>
        <!ATTLIST Record
          type          CDATA #REQUIRED
          unit          CDATA #IMPLIED
          value         CDATA #IMPLIED
          sourceName    CDATA #REQUIRED
          sourceVersion CDATA #IMPLIED
          device        CDATA #IMPLIED
          creationDate  CDATA #IMPLIED
          startDate     CDATA #REQUIRED
          endDate       CDATA #REQUIRED
        >
        <!-- Note: Any Records that appear as children of a correlation also appear as top-level records in this document. -->
        <!ELEMENT Correlation ((MetadataEntry|Record)*)>
        <!ATTLIST Correlation
          type          CDATA #REQUIRED
          sourceName    CDATA #REQUIRED
          sourceVersion CDATA #IMPLIED
          device        CDATA #IMPLIED
          creationDate  CDATA #IMPLIED
          startDate     CDATA #REQUIRED
          endDate       CDATA #REQUIRED
        >
        <!ELEMENT Workout ((MetadataEntry|WorkoutEvent|WorkoutRoute|WorkoutStatistics)*)>
        <!ATTLIST Workout
          workoutActivityType   CDATA #REQUIRED
          duration              CDATA #IMPLIED
          durationUnit          CDATA #IMPLIED
          sourceName            CDATA #REQUIRED
          sourceVersion         CDATA #IMPLIED
          device                CDATA #IMPLIED
          creationDate          CDATA #IMPLIED
          startDate             CDATA #REQUIRED
          endDate               CDATA #REQUIRED
        >
        <!ELEMENT WorkoutRoute ((MetadataEntry|FileReference|Location)*)>
        <!ATTLIST WorkoutRoute
          sourceName    CDATA #REQUIRED
          sourceVersion CDATA #IMPLIED
          device        CDATA #IMPLIED
          creationDate  CDATA #IMPLIED
          startDate     CDATA #REQUIRED
          endDate       CDATA #REQUIRED
        >
        <!ELEMENT ActivitySummary EMPTY>
        <!ATTLIST ActivitySummary
          dateComponents           CDATA #IMPLIED
          activeEnergyBurned       CDATA #IMPLIED
          activeEnergyBurnedGoal   CDATA #IMPLIED
          activeEnergyBurnedUnit   CDATA #IMPLIED
        >
        <!ELEMENT MetadataEntry EMPTY>
        <!ATTLIST MetadataEntry
          key   CDATA #REQUIRED
          value CDATA #REQUIRED
        >
        <!ELEMENT VisionPrescription ((RightEye|LeftEye|Attachment|MetadataEntry)*)>
        <!ATTLIST VisionPrescription
          type             CDATA #REQUIRED
          dateIssued       CDATA #REQUIRED
          expirationDate   CDATA #IMPLIED
          brand            CDATA #IMPLIED
        <!ELEMENT RightEye EMPTY>
        <!ATTLIST RightEye
          sphere            CDATA #IMPLIED
          sphereUnit        CDATA #IMPLIED
          cylinder          CDATA #IMPLIED
          axis              CDATA #IMPLIED
        <!ELEMENT LeftEye EMPTY>
        <!ATTLIST LeftEye
          sphere            CDATA #IMPLIED
          sphereUnit        CDATA #IMPLIED
          cylinder          CDATA #IMPLIED
          axis              CDATA #IMPLIED
        <!ELEMENT Attachment EMPTY>
        <!ATTLIST Attachment
          identifier        CDATA #IMPLIED
        >
        ]>
        """

    /// The declaration, the DTD (or none), `<HealthData>`, its ExportDate
    /// and Me, one line each, ending with a newline.
    public static func head(dtd: String? = iOS16DTD, exportDate: String? = "2024-06-30 21:14:05 -0700",
                            newline: String = "\n") -> [String] {
        var lines = ["<?xml version=\"1.0\" encoding=\"UTF-8\"?>"]
        if let dtd { lines += dtd.components(separatedBy: "\n") }
        lines.append("<HealthData locale=\"en_US\">")
        if let exportDate { lines.append(" <ExportDate value=\"\(exportDate)\"/>") }
        lines.append(" <Me HKCharacteristicTypeIdentifierDateOfBirth=\"1985-04-12\" HKCharacteristicTypeIdentifierBiologicalSex=\"HKBiologicalSexFemale\" HKCharacteristicTypeIdentifierBloodType=\"HKBloodTypeNotSet\" HKCharacteristicTypeIdentifierFitzpatrickSkinType=\"HKFitzpatrickSkinTypeNotSet\" HKCharacteristicTypeIdentifierCardioFitnessMedicationsUse=\"None\"/>")
        return lines
    }

    /// The other files of a real export.zip (small, for the directory's sake).
    public static let sideFiles: [(name: String, text: String)] = [
        ("apple_health_export/export_cda.xml",
         "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ClinicalDocument xmlns=\"urn:hl7-org:v3\">\n <title>Health Data Export</title>\n</ClinicalDocument>\n"),
        ("apple_health_export/workout-routes/route_2019-07-14_6.31pm.gpx",
         "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<gpx version=\"1.1\" creator=\"Apple Health Export\"><trk><trkseg><trkpt lon=\"-122.4\" lat=\"37.7\"><ele>21.2</ele><time>2019-07-14T18:31:00Z</time></trkpt></trkseg></trk></gpx>\n"),
        ("apple_health_export/electrocardiograms/ecg_2020-02-11.csv",
         "Name,Jane\nRecorded Date,2020-02-11 08:15:02 -0800\nClassification,Sinus Rhythm\n\n-12.5\n-11.9\n"),
    ]
}
