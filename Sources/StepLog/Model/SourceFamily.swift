/// How a source family's name is stored: `sourceAnchor` records carry its
/// FNV-1a 64-bit hash (stable across runs and platforms, unlike `Hasher`).
public enum SourceFamily {
    public static func fingerprint(_ family: String) -> UInt64 { LayeringRange.fingerprint(family) }
}
