internal import CCurl
import Foundation
import Synchronization

/// The thread that owns the multi handle and drives every transfer of one `HTTPClient`.
///
/// Callers hand jobs over under a `Mutex` and wake the thread with `curl_multi_wakeup`; the
/// thread waits in `curl_multi_poll`, starts new transfers, and resumes continuations as
/// `curl_multi_info_read` reports them done. Connections stay in the multi handle's cache
/// between requests (keep-alive). PLATFORM-NOTES measured 14.9k req/s at 16 in flight.
final class CurlWorker: Sendable {
    struct Job: Sendable {
        var id: UInt64
        var request: HTTPClientRequest
        var continuation: CheckedContinuation<HTTPClientResponse, any Error>
    }

    private struct Inbox {
        var jobs: [Job] = []
        var cancelled: [UInt64] = []
        var stopping = false
    }

    private let inbox = Mutex(Inbox())
    private let multi = MultiHandle()
    private let maxResponseBytes: Int
    private let exited = DispatchSemaphore(value: 0)
    private let threadID = Mutex<pthread_t?>(nil)

    /// Easy handles kept for reuse after `curl_easy_reset` (which keeps their DNS and TLS caches).
    private static let idleHandleLimit = 64

    init(maxResponseBytes: Int) {
        self.maxResponseBytes = maxResponseBytes
        let thread = Thread { [self] in run() }
        thread.start()
        // After start(): Foundation on Linux gives a name set before it to no thread (`top -H`,
        // /proc/…/comm).
        thread.name = "HTTPClient.curl"
    }

    /// Queues `job`; false when the worker is stopping (the caller then fails the job).
    func submit(_ job: Job) -> Bool {
        let accepted = inbox.withLock { inbox in
            guard !inbox.stopping else { return false }
            inbox.jobs.append(job)
            return true
        }
        if accepted { multi.wakeUp() }
        return accepted
    }

    /// Asks the worker to abandon transfer `id` (if it is still running) with `CancellationError`.
    func cancel(_ id: UInt64) {
        inbox.withLock { $0.cancelled.append(id) }
        multi.wakeUp()
    }

    /// Fails every queued and running transfer, then ends the thread. Waits for it unless called
    /// on the worker thread itself. Idempotent.
    func stop() {
        let first = inbox.withLock { inbox in
            defer { inbox.stopping = true }
            return !inbox.stopping
        }
        guard first else { return }
        multi.wakeUp()
        let onWorker = threadID.withLock { id in id.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
        if !onWorker { exited.wait() }
    }

    // MARK: The worker thread

    private func run() {
        threadID.withLock { $0 = pthread_self() }
        var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
        var idle: [EasyHandle] = []

        func recycle(_ easy: EasyHandle) {
            curl_easy_reset(easy.pointer)
            if idle.count < Self.idleHandleLimit { idle.append(easy) }
        }

        func remove(_ transfer: CurlTransfer) {
            active[transfer.easy.pointer] = nil
            curl_multi_remove_handle(multi.pointer, transfer.easy.pointer)
        }

        while true {
            let (jobs, cancelled, stopping) = inbox.withLock { inbox in
                defer {
                    inbox.jobs.removeAll(keepingCapacity: true)
                    inbox.cancelled.removeAll()
                }
                return (inbox.jobs, inbox.cancelled, inbox.stopping)
            }
            if stopping {
                for job in jobs { job.continuation.resume(throwing: HTTPClientError.shutDown) }
                for transfer in active.values {
                    remove(transfer)
                    transfer.fail(HTTPClientError.shutDown)
                }
                active.removeAll()
                idle.removeAll()
                exited.signal()
                return
            }
            for job in jobs {
                do {
                    let easy = try idle.popLast() ?? EasyHandle()
                    let transfer = CurlTransfer(
                        id: job.id, easy: easy, continuation: job.continuation, maxResponseBytes: maxResponseBytes)
                    do {
                        try transfer.configure(job.request)
                        let code = curl_multi_add_handle(multi.pointer, easy.pointer)
                        guard code == CURLM_OK else { throw HTTPClientError(curlMultiCode: code, function: "curl_multi_add_handle") }
                        active[easy.pointer] = transfer
                    } catch {
                        transfer.fail(error)
                        recycle(easy)
                    }
                } catch {
                    job.continuation.resume(throwing: error)
                }
            }
            for id in cancelled {
                guard let transfer = active.values.first(where: { $0.id == id }) else { continue }
                remove(transfer)
                transfer.fail(CancellationError())
                recycle(transfer.easy)
            }

            var running: Int32 = 0
            _ = curl_multi_perform(multi.pointer, &running)
            var queued: Int32 = 0
            while let message = curl_multi_info_read(multi.pointer, &queued) {
                guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
                let code = message.pointee.data.result  // read before remove: the message dies with it
                guard let transfer = active[easy] else { continue }
                remove(transfer)
                transfer.complete(code)
                recycle(transfer.easy)
            }
            // Returns early on socket activity, curl's own timers, or curl_multi_wakeup.
            _ = curl_multi_poll(multi.pointer, nil, 0, 1000, nil)
        }
    }
}
