import CloudletConcurrency
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A child process started with `posix_spawn`, for tests, tools and benchmarks that start programs.
///
/// Not Foundation's `Process`: on Linux its `run()` lists `/proc/self/fd` to close inherited descriptors and copies
/// each directory entry's whole 256-byte name field, reading past the end of glibc's buffer when an entry sits at
/// its end — an intermittent SIGSEGV in `memcpy` under `Process.run()` that took down the parallel test run
/// (swift-corelibs-foundation#5472, fixed after the toolchain we build with). Here the child closes every
/// descriptor above 2 but the ones it is given (glibc's `posix_spawn_file_actions_addclosefrom_np`) and runs in a
/// process group of its own, as `Process` starts it.
///
/// `@unchecked Sendable`: the exit status is guarded by `lock`.
public final class SpawnedProcess: @unchecked Sendable {
    /// The child's process ID.
    public let processIdentifier: pid_t
    private let lock = NSLock()
    /// The raw wait status, once the child has been reaped.
    private var waitStatus: Int32?

    /// Starts `executable` with `args` and `environment` (nil: this process's); `stdin`, `stdout`, `stderr` become
    /// the child's 0, 1 and 2 (nil: inherited).
    public init(
        _ executable: String, _ args: [String], environment: [String: String]? = nil, stdin: Int32? = nil,
        stdout: Int32? = nil, stderr: Int32? = nil
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (fd, target) in [(stdin, Int32(0)), (stdout, 1), (stderr, 2)] {
            if let fd { posix_spawn_file_actions_adddup2(&actions, fd, target) }
        }
        guard let closeFrom = Self.addCloseFrom else {
            throw ChildProcess.Failure(message: "posix_spawn_file_actions_addclosefrom_np is missing (glibc 2.34 or later)")
        }
        _ = closeFrom(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)

        let argv = ([executable] + args).map { strdup($0) } + [nil]
        defer { for a in argv { free(a) } }
        var envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for e in envp ?? [] { free(e) } }
        var pid: pid_t = 0
        let rc: Int32
        if envp != nil {
            rc = envp!.withUnsafeMutableBufferPointer { posix_spawn(&pid, executable, &actions, &attributes, argv, $0.baseAddress) }
        } else {
            rc = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        }
        guard rc == 0 else {
            throw ChildProcess.Failure(message: "cannot start \(executable): \(String(cString: strerror(rc)))")
        }
        processIdentifier = pid
    }

    /// What ``run(_:_:environment:input:)`` returns.
    public struct Output: Sendable {
        public var status: Int32
        public var reason: Process.TerminationReason
        public var stdout: Data
        public var stderr: Data
    }

    /// Runs `executable` to completion with `input` on its stdin (nil: none, /dev/null), collecting its stdout
    /// and stderr (both read while it runs, so that a full pipe never blocks it). Blocks the calling thread.
    public static func run(
        _ executable: String, _ args: [String], environment: [String: String]? = nil, input: Data? = nil
    ) throws -> Output {
        let inPipe = Pipe(), outPipe = Pipe(), errPipe = Pipe()
        let child = try SpawnedProcess(
            executable, args, environment: environment, stdin: inPipe.fileHandleForReading.fileDescriptor,
            stdout: outPipe.fileHandleForWriting.fileDescriptor, stderr: errPipe.fileHandleForWriting.fileDescriptor)
        // The child has its own copies of these ends.
        try inPipe.fileHandleForReading.close()
        try outPipe.fileHandleForWriting.close()
        try errPipe.fileHandleForWriting.close()
        final class Box: @unchecked Sendable {  // written by the reader before `done.signal()`, read after `wait()`
            var data = Data()
        }
        let errBox = Box()
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            errBox.data = errPipe.fileHandleForReading.readDataToEndOfFile()
            done.signal()
        }
        // A child that exits without reading its input must not take this process with it (SIGPIPE).
        if input != nil { signal(SIGPIPE, SIG_IGN) }
        Thread.detachNewThread {
            if let input { try? inPipe.fileHandleForWriting.write(contentsOf: input) }
            try? inPipe.fileHandleForWriting.close()
            done.signal()
        }
        let out = outPipe.fileHandleForReading.readDataToEndOfFile()
        done.wait()
        done.wait()
        child.waitUntilExit()
        return Output(status: child.terminationStatus, reason: child.terminationReason, stdout: out, stderr: errBox.data)
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np`, which Swift's Glibc module does not import (it is a GNU
    /// extension), found at run time.
    private static let addCloseFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else {
            return nil
        }
        return unsafeBitCast(
            symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
    }()

    /// Whether the child has not exited yet.
    public var isRunning: Bool { reap(blocking: false) == nil }

    /// Blocks until the child has exited.
    public func waitUntilExit() { _ = reap(blocking: true) }

    /// Waits for the exit on a thread outside the cooperative pool (see ``ChildProcess/waitForExit()``).
    public func exit() async {
        await ThreadBridge.offload { self.waitUntilExit() }
    }

    /// The exit code, or the number of the signal that ended the child (as `Process` reports them).
    public var terminationStatus: Int32 {
        let s = reap(blocking: true)!
        return s & 0x7f == 0 ? (s >> 8) & 0xff : s & 0x7f
    }

    /// Whether the child exited or was ended by a signal.
    public var terminationReason: Process.TerminationReason {
        reap(blocking: true)! & 0x7f == 0 ? .exit : .uncaughtSignal
    }

    /// The wait status once the child has exited (reaping it once; `blocking` waits for that).
    private func reap(blocking: Bool) -> Int32? {
        if let s = lock.withLock({ waitStatus }) { return s }
        var status: Int32 = 0
        while true {
            let r = waitpid(processIdentifier, &status, blocking ? 0 : WNOHANG)
            if r == processIdentifier {
                lock.withLock { waitStatus = status }
                return status
            }
            if r == 0 { return nil }  // still running
            if errno == EINTR { continue }
            // ECHILD: another thread reaped it; its status is recorded as soon as that call returns.
            while true {
                if let s = lock.withLock({ waitStatus }) { return s }
                if !blocking { return nil }
                usleep(1_000)
            }
        }
    }
}
