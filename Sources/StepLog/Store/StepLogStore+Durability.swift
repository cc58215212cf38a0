import Foundation

/// Pipelined durability: a writer starts the sync of batch k on the store's
/// sync thread (`syncInBackground`), writes batch k+1 while the disk works,
/// and acknowledges batch k once `waitUntilDurable` returns for its ticket:
///
///     var previous: DurabilityTicket?
///     for batch in batches {
///         try store.upsert(batch, fetchedAt: now)
///         let ticket = try store.syncInBackground()
///         if let previous { try store.waitUntilDurable(previous) }   // acknowledge the batch before
///         previous = ticket
///     }
///     if let previous { try store.waitUntilDurable(previous) }
///
/// Each batch is acknowledged only after a sync that started after its records
/// were written returned successfully, as with `sync()`. A failed sync fails
/// its ticket and every later one (the store refuses writes until reopened);
/// tickets it did not cover are never satisfied by a later sync.
extension StepLogStore {
    /// Writes out everything appended so far (padded to a sector boundary,
    /// as `sync()` pads) and starts making it durable on the store's sync
    /// thread; returns at once. The records are durable once
    /// `waitUntilDurable` returns for the ticket.
    public func syncInBackground() throws -> DurabilityTicket {
        try locked {
            let w = try writableWriter()
            if let size = syncer.takeCompleted(for: w) { w.noteSynced(size: size) }
            do {
                guard w.hasUnsyncedBytes else {
                    syncer.noteDurable(w.endPosition)
                    return DurabilityTicket(position: w.endPosition)
                }
                // The synced-through record of a sync that finished while this
                // batch was written goes after the batch, inside this sync.
                _ = w.beginAppend()
                if options.padSyncsToSector && !w.padToSector() {
                    // No room for the padding: sealing syncs (here, after the
                    // background sync finished), the next append goes to a new file.
                    let next = try roll()
                    return DurabilityTicket(position: next.endPosition)
                }
                try w.flush()
                try syncer.request(BackgroundSyncer.Request(
                    fd: w.fd, preallocator: w.preallocator, writer: ObjectIdentifier(w),
                    size: w.info.size, position: w.endPosition))
                return DurabilityTicket(position: w.endPosition)
            } catch {
                throw fail(error)
            }
        }
    }

    /// Returns once the records the ticket covers are durable. Throws the
    /// failure of the sync that should have made them durable (or of any
    /// earlier one); the store then refuses writes until it is reopened.
    /// Takes no store lock while it waits: other threads keep writing.
    public func waitUntilDurable(_ ticket: DurabilityTicket) throws {
        do {
            try syncer.wait(for: ticket.position)
        } catch {
            throw locked { fail(error) }
        }
    }

    /// True when the ticket's records are durable (`waitUntilDurable` would
    /// return at once); false while its sync runs, and after it failed.
    public func isDurable(_ ticket: DurabilityTicket) -> Bool {
        syncer.isDurable(ticket.position)
    }

    /// Before the writer syncs, seals or closes its file itself: waits for
    /// the sync thread, takes what it made durable, and fails with what it
    /// failed with (a later sync of ours must not vouch for bytes it lost).
    func settleBackgroundSyncs(_ w: SegmentWriter) throws {
        syncer.drain()
        if let size = syncer.takeCompleted(for: w) { w.noteSynced(size: size) }
        if let failed = syncer.failure { throw fail(failed) }
    }
}
