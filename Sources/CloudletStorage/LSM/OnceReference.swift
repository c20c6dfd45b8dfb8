import Synchronization

/// A reference stored once and then read without a lock: what the standard library's `AtomicLazyReference` does,
/// for the objects every point read asks for (a run's reader, index and filter). Its `load()` reached the runtime's
/// generic-metadata cache on each call from here (`swift_getGenericMetadata`, a lock and a hash lookup) — a
/// tenth of a point read's probe of a run; this one is specialized where it is used and is a load and a retain.
///
/// The stored object is kept (retained) until the holder goes.
struct OnceReference<Instance: AnyObject & Sendable>: ~Copyable, @unchecked Sendable {
    /// The stored object's address (retained once), or 0.
    private let address = Atomic<UInt>(0)

    init() {}

    /// The stored object, or nil if none is yet.
    @inline(__always)
    func load() -> Instance? {
        let bits = address.load(ordering: .acquiring)
        guard let pointer = UnsafeRawPointer(bitPattern: bits) else { return nil }
        return Unmanaged<Instance>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Stores `value` unless another object is stored already; returns the one stored.
    func storeIfNil(_ value: Instance) -> Instance {
        let retained = Unmanaged.passRetained(value)
        let bits = UInt(bitPattern: retained.toOpaque())
        let (stored, current) = address.compareExchange(
            expected: 0, desired: bits, ordering: .acquiringAndReleasing)
        if stored { return value }
        retained.release()
        return Unmanaged<Instance>.fromOpaque(UnsafeRawPointer(bitPattern: current)!).takeUnretainedValue()
    }

    deinit {
        if let pointer = UnsafeRawPointer(bitPattern: address.load(ordering: .acquiring)) {
            Unmanaged<Instance>.fromOpaque(pointer).release()
        }
    }
}
