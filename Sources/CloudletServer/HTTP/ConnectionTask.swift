import CEventHTTP
import CloudletConcurrency
import Synchronization

/// A task that serves one connection after its request has left the worker — a long poll's answer, a websocket's
/// pusher — and that ends when the client goes: it runs on ``DedicatedExecutor/push`` (never on the cooperative
/// pool, which blocking code elsewhere can hold for seconds) and is cancelled as soon as the front end sees the
/// client close the connection (or half-close it while its answer is awaited), so a wait for notifications ends
/// then rather than at its timeout.
enum ConnectionTask {
    /// Starts `body` for `connection`, then — once the watch has ended — `finish` with its result (writing the
    /// answer or closing the websocket: the next request on a keep-alive connection may start its own watch as soon
    /// as the answer is out). `body` should end soon after it is cancelled.
    static func start<T: Sendable>(
        for connection: OpaquePointer, _ body: @escaping @Sendable () async -> T,
        then finish: @escaping @Sendable (T) -> Void
    ) {
        let canceller = Canceller()
        let context = Unmanaged.passRetained(canceller)
        // Watching before the task exists: the task's end, which ends the watch, cannot come before it.
        let watching = eh_conn_watch(connection, clientGone, context.toOpaque()) == 1
        if !watching { context.release() }
        let held = HeldConnection(connection)
        let task = Task(executorPreference: DedicatedExecutor.push) {
            let result = await body()
            if watching, let left = eh_conn_unwatch(held.pointer) {
                Unmanaged<Canceller>.fromOpaque(left).release()
            }
            finish(result)
        }
        canceller.set(task)
        if !watching { task.cancel() }  // the client had gone already
    }

    /// What the front end's callback cancels; the client may go before the task is known.
    final class Canceller: Sendable {
        private let state = Mutex<(task: Task<Void, Never>?, gone: Bool)>((nil, false))

        func set(_ task: Task<Void, Never>) {
            if state.withLock({ s -> Bool in
                s.task = task
                return s.gone
            }) { task.cancel() }
        }

        func gone() {
            state.withLock { s -> Task<Void, Never>? in
                s.gone = true
                return s.task
            }?.cancel()
        }
    }
}

/// Called once on the loop thread when the watched client goes; takes the watch's reference to its canceller.
private let clientGone: eh_gone_fn = { context in
    guard let context else { return }
    Unmanaged<ConnectionTask.Canceller>.fromOpaque(context).takeRetainedValue().gone()
}
