import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The benchmark's peer: the same upsert job done by SQLite, the database a
/// user would reach for. Loaded with dlopen so the package needs no SQLite
/// headers or link-time dependency (`packages: none`); WAL mode, a 16-byte
/// UUID primary key, 1,000-row transactions, SQLite's default durability
/// (synchronous=FULL: every commit is fsynced) and default cache size.
final class SQLitePeer {
    private typealias Open = @convention(c) (UnsafePointer<CChar>, UnsafeMutablePointer<OpaquePointer?>, Int32, UnsafePointer<CChar>?) -> Int32
    private typealias Exec = @convention(c) (OpaquePointer, UnsafePointer<CChar>, OpaquePointer?, OpaquePointer?, OpaquePointer?) -> Int32
    private typealias Prepare = @convention(c) (OpaquePointer, UnsafePointer<CChar>, Int32, UnsafeMutablePointer<OpaquePointer?>, OpaquePointer?) -> Int32
    private typealias BindBlob = @convention(c) (OpaquePointer, Int32, UnsafeRawPointer?, Int32, Int) -> Int32
    private typealias BindInt64 = @convention(c) (OpaquePointer, Int32, Int64) -> Int32
    private typealias BindNull = @convention(c) (OpaquePointer, Int32) -> Int32
    private typealias Step = @convention(c) (OpaquePointer) -> Int32
    private typealias Reset = @convention(c) (OpaquePointer) -> Int32
    private typealias Close = @convention(c) (OpaquePointer) -> Int32
    private typealias ErrMsg = @convention(c) (OpaquePointer) -> UnsafePointer<CChar>
    private typealias LibVersion = @convention(c) () -> UnsafePointer<CChar>

    private let open_: Open, exec_: Exec, prepare_: Prepare, bindBlob: BindBlob, bindText: BindBlob
    private let bindInt64: BindInt64, bindNull: BindNull, step: Step, reset: Reset, finalize: Reset, close_: Close
    private let errmsg: ErrMsg
    let version: String
    private var db: OpaquePointer?
    private var upsertStatement: OpaquePointer?
    private var deleteStatement: OpaquePointer?

    /// nil when no SQLite library can be loaded on this system.
    init?() {
        let names = ["libsqlite3.so.0", "libsqlite3.so", "/usr/lib/libsqlite3.dylib", "libsqlite3.dylib"]
        guard let handle = names.lazy.compactMap({ dlopen($0, RTLD_NOW) }).first else { return nil }
        func symbol<T>(_ name: String, _ type: T.Type) -> T? {
            guard let pointer = dlsym(handle, name) else { return nil }
            return unsafeBitCast(pointer, to: type)
        }
        guard let o = symbol("sqlite3_open_v2", Open.self), let e = symbol("sqlite3_exec", Exec.self),
              let p = symbol("sqlite3_prepare_v2", Prepare.self), let bb = symbol("sqlite3_bind_blob", BindBlob.self),
              let bt = symbol("sqlite3_bind_text", BindBlob.self), let bi = symbol("sqlite3_bind_int64", BindInt64.self),
              let bn = symbol("sqlite3_bind_null", BindNull.self), let s = symbol("sqlite3_step", Step.self),
              let r = symbol("sqlite3_reset", Reset.self), let f = symbol("sqlite3_finalize", Reset.self),
              let c = symbol("sqlite3_close", Close.self), let m = symbol("sqlite3_errmsg", ErrMsg.self),
              let v = symbol("sqlite3_libversion", LibVersion.self) else { return nil }
        open_ = o; exec_ = e; prepare_ = p; bindBlob = bb; bindText = bt; bindInt64 = bi; bindNull = bn
        step = s; reset = r; finalize = f; close_ = c; errmsg = m
        version = String(cString: v())
    }

    func open(_ path: String) throws {
        var handle: OpaquePointer?
        guard open_(path, &handle, 0x2 | 0x4, nil) == 0, let handle else { throw PeerError("cannot open \(path)") }
        db = handle
        try execute("PRAGMA journal_mode=WAL")
        try execute("PRAGMA synchronous=FULL")
        try execute("""
            CREATE TABLE IF NOT EXISTS samples (id BLOB PRIMARY KEY, start INTEGER NOT NULL, end INTEGER NOT NULL,
              count INTEGER NOT NULL, bundle TEXT NOT NULL, device TEXT, fetched_at INTEGER NOT NULL,
              synced INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID
            """)
        var statement: OpaquePointer?
        let sql = """
            INSERT INTO samples (id, start, end, count, bundle, device, fetched_at, synced) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0)
            ON CONFLICT(id) DO UPDATE SET start = excluded.start, end = excluded.end, count = excluded.count,
              bundle = excluded.bundle, device = excluded.device, fetched_at = excluded.fetched_at, synced = 0
            WHERE start IS NOT excluded.start OR end IS NOT excluded.end OR count IS NOT excluded.count
              OR bundle IS NOT excluded.bundle OR device IS NOT excluded.device
            """
        guard prepare_(db!, sql, -1, &statement, nil) == 0 else { throw PeerError(String(cString: errmsg(db!))) }
        upsertStatement = statement
        var delete: OpaquePointer?
        guard prepare_(db!, "DELETE FROM samples WHERE id = ?1", -1, &delete, nil) == 0 else { throw PeerError(String(cString: errmsg(db!))) }
        deleteStatement = delete
    }

    /// Deletes one batch of ids in one transaction (committed, hence fsynced, on return).
    func delete(_ ids: [UUID]) throws {
        try execute("BEGIN")
        let st = deleteStatement!
        for id in ids {
            var uuid = id.uuid
            _ = withUnsafeBytes(of: &uuid) { bindBlob(st, 1, $0.baseAddress, 16, -1) }
            guard step(st) == 101 else { throw PeerError(String(cString: errmsg(db!))) } // SQLITE_DONE
            _ = reset(st)
        }
        try execute("COMMIT")
    }

    private func execute(_ sql: String) throws {
        guard exec_(db!, sql, nil, nil, nil) == 0 else { throw PeerError("\(sql): \(String(cString: errmsg(db!)))") }
    }

    /// Upserts one batch in one transaction (committed, hence fsynced, on return).
    func upsert(_ batch: [(id: UUID, start: Int64, end: Int64, count: Int, bundle: String, device: String?)], fetchedAt: Int64) throws {
        try execute("BEGIN")
        let st = upsertStatement!
        for s in batch {
            var uuid = s.id.uuid
            _ = withUnsafeBytes(of: &uuid) { bindBlob(st, 1, $0.baseAddress, 16, -1) }
            _ = bindInt64(st, 2, s.start)
            _ = bindInt64(st, 3, s.end)
            _ = bindInt64(st, 4, Int64(s.count))
            _ = s.bundle.withCString { bindText(st, 5, $0, -1, -1) }
            if let d = s.device { _ = d.withCString { bindText(st, 6, $0, -1, -1) } } else { _ = bindNull(st, 6) }
            _ = bindInt64(st, 7, fetchedAt)
            guard step(st) == 101 else { throw PeerError(String(cString: errmsg(db!))) } // SQLITE_DONE
            _ = reset(st)
        }
        try execute("COMMIT")
    }

    func close() {
        if let st = upsertStatement { _ = finalize(st) }
        if let st = deleteStatement { _ = finalize(st) }
        upsertStatement = nil
        deleteStatement = nil
        if let db { _ = close_(db) }
        db = nil
    }

    struct PeerError: Error, CustomStringConvertible {
        var description: String
        init(_ d: String) { description = "sqlite: " + d }
    }
}
