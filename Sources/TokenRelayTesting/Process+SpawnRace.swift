import Foundation

extension Process {
    /// `run()`, tried again (up to `attempts` times in all) when the spawn fails with EBADF.
    ///
    /// swift-corelibs-foundation emulates `POSIX_SPAWN_CLOEXEC_DEFAULT` on Linux by listing every
    /// descriptor open at the moment and asking the child to close each: a descriptor another
    /// thread closes in between fails the whole spawn with "Bad file descriptor" (seen in a
    /// fresh-root `make test`: a replica test's emulator did not start). A test process opens and
    /// closes descriptors on many threads (sockets, pipes, libpq, libcurl), so this is a race of
    /// the harness, not of the program started; when the spawn fails nothing was started, and
    /// the same `Process` may run again.
    /// - Throws: what `run()` throws, on the last attempt or for any other error.
    public func runRetryingDescriptorRace(attempts: Int = 5) throws {
        for attempt in 1... {
            do {
                return try run()
            } catch let error as NSError where attempt < attempts && Self.isBadFileDescriptor(error) {
                let name = executableURL?.lastPathComponent ?? "a process"
                FileHandle.standardError.write(Data("Process: spawning \(name) failed with EBADF (attempt \(attempt)); trying again\n".utf8))
                usleep(UInt32(attempt) * 20_000)
            }
        }
    }

    private static func isBadFileDescriptor(_ error: NSError) -> Bool {
        let posix = error.domain == NSPOSIXErrorDomain ? error : error.userInfo[NSUnderlyingErrorKey] as? NSError
        return posix?.domain == NSPOSIXErrorDomain && posix?.code == Int(EBADF)
    }
}
