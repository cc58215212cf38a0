/// A command line as a person pastes it into a shell: each word as it is
/// when that is safe, otherwise in single quotes ("To continue: …" lines).
public enum ShellCommand {
    public static func line(_ words: [String]) -> String {
        words.map(quoted).joined(separator: " ")
    }

    static func quoted(_ word: String) -> String {
        let plain = !word.isEmpty && word.unicodeScalars.allSatisfy { c in
            c.properties.isAlphabetic || ("0"..."9").contains(c) || "-_./:=,@%+~".unicodeScalars.contains(c)
        }
        if plain && !word.hasPrefix("~") { return word }
        return "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}
