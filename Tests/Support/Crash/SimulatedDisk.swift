import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Replays a recording's operations on one store directory and says what a
/// power loss at the current point may leave: for each file, the bytes a
/// successful sync made durable, plus any subset of the units (pages or
/// sectors, per `CrashModel`) written since; names and sizes as the model
/// lets them persist.
///
/// Linux's errseq behaviour after a failed sync: the file's dirty units are
/// marked clean *without* becoming durable. They are lost at a power loss
/// unless written again (a later successful sync does not write them).
/// Operations outside the store directory are ignored; the directory itself
/// is taken as durable.
public final class SimulatedDisk {
    struct Inode {
        var current: [UInt8]
        var durable: [UInt8]
        var durableSize: Int
        /// Unit index → sequence number of the last write to it since the last sync.
        var dirty: [Int: Int] = [:]
        /// Units a failed sync marked clean without writing them (errseq):
        /// their durable bytes stay old until they are written again.
        var lost: Set<Int> = []

        /// A successful sync: every unit durable as it reads now, except the lost ones.
        mutating func synced(unit: Int) {
            var next = current
            for u in lost {
                let lo = u * unit
                guard lo < next.count else { continue }
                for i in lo..<min(next.count, lo + unit) { next[i] = i < durable.count ? durable[i] : 0 }
            }
            durable = next
            durableSize = current.count
            dirty = [:]
        }
    }
    enum NameOperation { case link(String, Int), unlink(String), rename(String, String) }

    public let model: CrashModel
    public let root: String
    private var inodes: [Int: Inode] = [:]
    private var nextInode = 1
    private var names: [String: Int] = [:]
    private var durableNames: [String: Int] = [:]
    private var pendingNames: [NameOperation] = []
    private var sizePending: Set<Int> = []
    private var sequence = 0

    public init(model: CrashModel, root: String, initialFiles: [String: [UInt8]]) {
        self.model = model
        self.root = root.hasSuffix("/") ? String(root.dropLast()) : root
        for (name, bytes) in initialFiles.sorted(by: { $0.key < $1.key }) {
            let id = nextInode
            nextInode += 1
            inodes[id] = Inode(current: bytes, durable: bytes, durableSize: bytes.count)
            names[name] = id
            durableNames[name] = id
        }
    }

    private func name(_ path: String) -> String? {
        guard path.hasPrefix(root + "/") else { return nil }
        let rest = path.dropFirst(root.count + 1)
        return rest.isEmpty || rest.contains("/") ? nil : String(rest)
    }

    /// Applies one recorded operation with the result it had.
    public func apply(_ operation: RecordedOperation, result: Int32) {
        sequence += 1
        switch operation {
        case .sync(let path):
            guard let n = name(path), let id = names[n] else { return }
            if result == 0 {
                inodes[id]!.synced(unit: model.unit)
                sizePending.remove(id)
                if model == .ext4 { commitJournal() }
            } else {
                // errseq: the dirty units are marked clean, never written.
                inodes[id]!.lost.formUnion(inodes[id]!.dirty.keys)
                inodes[id]!.dirty = [:]
            }
            return
        case .syncDirectory(let path):
            guard result == 0, path == root || path == root + "/" else { return }
            commitNames()
            if model == .ext4 { commitJournal() }
            return
        default:
            break
        }
        guard result == 0 else { return }
        switch operation {
        case .open(let path, let flags):
            guard let n = name(path) else { return }
            if let id = names[n] {
                if flags & O_TRUNC != 0 { resize(id, to: 0) }
            } else if flags & O_CREAT != 0 {
                let id = nextInode
                nextInode += 1
                inodes[id] = Inode(current: [], durable: [], durableSize: 0)
                names[n] = id
                pendingNames.append(.link(n, id))
            }
        case .write(let path, let offset, let bytes):
            guard let n = name(path), let id = names[n], !bytes.isEmpty else { return }
            let start = Int(offset), end = start + bytes.count
            if inodes[id]!.current.count < end {
                inodes[id]!.current += [UInt8](repeating: 0, count: end - inodes[id]!.current.count)
                sizePending.insert(id)
            }
            inodes[id]!.current.replaceSubrange(start..<end, with: bytes)
            for unit in (start / model.unit)...((end - 1) / model.unit) {
                inodes[id]!.dirty[unit] = sequence
                inodes[id]!.lost.remove(unit)
            }
        case .truncate(let path, let size):
            guard let n = name(path), let id = names[n] else { return }
            resize(id, to: Int(size))
        case .rename(let from, let to):
            guard let f = name(from), let t = name(to), let id = names[f] else { return }
            names[f] = nil
            names[t] = id
            pendingNames.append(.rename(f, t))
        case .remove(let path):
            guard let n = name(path), names[n] != nil else { return }
            names[n] = nil
            pendingNames.append(.unlink(n))
        case .createDirectory, .sync, .syncDirectory:
            break
        }
    }

    private func resize(_ id: Int, to size: Int) {
        let count = inodes[id]!.current.count
        if size < count { inodes[id]!.current.removeSubrange(size...) }
        else if size > count { inodes[id]!.current += [UInt8](repeating: 0, count: size - count) }
        sizePending.insert(id)
    }

    private func commitNames() {
        for op in pendingNames { Self.apply(op, to: &durableNames) }
        pendingNames.removeAll()
    }

    /// ext4: a journal commit makes every earlier metadata change durable
    /// (names and sizes; the data of other files stays as it was).
    private func commitJournal() {
        commitNames()
        for id in sizePending { inodes[id]!.durableSize = inodes[id]!.current.count }
        sizePending.removeAll()
    }

    private static func apply(_ op: NameOperation, to names: inout [String: Int]) {
        switch op {
        case .link(let n, let id): names[n] = id
        case .unlink(let n): names[n] = nil
        case .rename(let f, let t):
            if let id = names[f] { names[f] = nil; names[t] = id }
        }
    }

    // MARK: Crash states

    /// A unit written since its file's last sync.
    struct DirtyUnit: Hashable { var inode: Int; var unit: Int }

    /// How many of each kind of variant `crashStates` builds per crash point.
    public struct Variants: Sendable {
        public var prefixes = 6
        public var singleDrops = 6
        public var garbage = 4
        public var random = 4
        public var namePrefixes = 4
        public init() {}
        public static let small: Variants = {
            var v = Variants()
            v.prefixes = 2; v.singleDrops = 2; v.garbage = 2; v.random = 1; v.namePrefixes = 2
            return v
        }()
    }

    /// The disk states a power loss now may leave (file name → bytes), a
    /// bounded set: no unsynced unit persisted, all, each prefix in write
    /// order, all but one, one garbled (strict), seeded random subsets; and
    /// names and sizes persisted not at all, fully, or as a prefix.
    public func crashStates(_ variants: Variants, rng: inout SplitMix64) -> [[String: [UInt8]]] {
        var units: [(DirtyUnit, Int)] = []
        for (id, inode) in inodes where names.values.contains(id) || durableNames.values.contains(id) {
            for (unit, seq) in inode.dirty { units.append((DirtyUnit(inode: id, unit: unit), seq)) }
        }
        units.sort { $0.1 < $1.1 || ($0.1 == $1.1 && ($0.0.inode, $0.0.unit) < ($1.0.inode, $1.0.unit)) }
        let ordered = units.map(\.0)
        var dataSets: [(Set<DirtyUnit>, DirtyUnit?)] = [([], nil), (Set(ordered), nil)]
        func spread(_ count: Int, _ limit: Int) -> [Int] {
            guard count > 0, limit > 0 else { return [] }
            if count <= limit { return Array(0..<count) }
            return (0..<limit).map { $0 * count / limit + count / limit / 2 }
        }
        for k in spread(ordered.count, variants.prefixes) where k > 0 { dataSets.append((Set(ordered[..<k]), nil)) }
        for i in spread(ordered.count, variants.singleDrops) {
            var s = Set(ordered)
            s.remove(ordered[i])
            dataSets.append((s, nil))
        }
        if model.tearsUnits {
            // Only a unit whose bytes change can be caught mid-write (a write
            // of identical bytes is assumed not to garble its sector).
            let changing = ordered.filter { unitChanges($0) }
            for u in changing.suffix(variants.garbage) {
                dataSets.append((Set(ordered), u))
                dataSets.append(([], u))
            }
        }
        for _ in 0..<variants.random where !ordered.isEmpty {
            dataSets.append((Set(ordered.filter { _ in rng.next() & 1 == 0 }), nil))
        }
        var states: [[String: [UInt8]]] = []
        for (set, garbage) in dataSets { states.append(build(names: nil, currentSizes: true, persisted: set, garbage: garbage, rng: &rng)) }
        let nameCounts = [0] + spread(pendingNames.count, variants.namePrefixes).map { $0 + 1 }.filter { $0 < pendingNames.count }
        for k in Set(nameCounts) {
            for set in [Set<DirtyUnit>(), Set(ordered)] {
                states.append(build(names: k, currentSizes: true, persisted: set, garbage: nil, rng: &rng))
                states.append(build(names: k, currentSizes: false, persisted: set, garbage: nil, rng: &rng))
            }
        }
        states.append(build(names: nil, currentSizes: false, persisted: [], garbage: nil, rng: &rng))
        return states
    }

    private func unitChanges(_ u: DirtyUnit) -> Bool {
        let inode = inodes[u.inode]!
        let lo = u.unit * model.unit
        let hi = lo + model.unit
        func slice(_ b: [UInt8]) -> ArraySlice<UInt8> { b[min(lo, b.count)..<min(hi, b.count)] }
        return slice(inode.current) != slice(inode.durable)
    }

    private func build(names nameCount: Int?, currentSizes: Bool, persisted: Set<DirtyUnit>, garbage: DirtyUnit?,
                       rng: inout SplitMix64) -> [String: [UInt8]] {
        var visible = durableNames
        for op in pendingNames.prefix(nameCount ?? pendingNames.count) { Self.apply(op, to: &visible) }
        var files: [String: [UInt8]] = [:]
        for (name, id) in visible {
            let inode = inodes[id]!
            let size = currentSizes || !sizePending.contains(id) ? inode.current.count : inode.durableSize
            var bytes = Array(inode.durable.prefix(size))
            if bytes.count < size { bytes += [UInt8](repeating: 0, count: size - bytes.count) }
            for unit in inode.dirty.keys {
                let key = DirtyUnit(inode: id, unit: unit)
                let lo = unit * model.unit
                guard lo < size else { continue }
                let hi = min(size, lo + model.unit)
                if key == garbage {
                    for i in lo..<hi { bytes[i] = UInt8(truncatingIfNeeded: rng.next()) }
                } else if persisted.contains(key) {
                    for i in lo..<hi { bytes[i] = i < inode.current.count ? inode.current[i] : 0 }
                }
            }
            files[name] = bytes
        }
        return files
    }
}
