import CCivetweb
import Foundation

/// A websocket client for tests, on civetweb's client API: collects the text messages the server pushes.
/// `@unchecked Sendable`: `messages` is guarded by `lock`; `connection` is written once before use.
final class WebSocketTestClient: @unchecked Sendable {
    private let lock = NSLock()
    private var messages: [String] = []
    private var connection: OpaquePointer?

    init(host: String, port: Int, path: String) throws {
        var error = [CChar](repeating: 0, count: 256)
        let me = Unmanaged.passUnretained(self).toOpaque()
        connection = error.withUnsafeMutableBufferPointer { buf in
            mg_connect_websocket_client(host, Int32(port), 0, buf.baseAddress, buf.count, path, nil, wsClientData, wsClientClose, me)
        }
        if connection == nil {
            let text = error.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            throw NSError(domain: "websocket", code: 1, userInfo: [NSLocalizedDescriptionKey: "connect failed: \(text)"])
        }
    }

    fileprivate func received(_ text: String) { lock.withLock { messages.append(text) } }

    var received: [String] { lock.withLock { messages } }

    /// Waits until at least `count` messages arrived (or `timeout` seconds passed); returns them.
    func wait(for count: Int, timeout: Double = 10) async throws -> [String] {
        let deadline = Date().addingTimeInterval(timeout)
        while received.count < count && Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        return received
    }

    /// Sends a close frame and closes (so the server's shutdown does not wait on this connection).
    func close() {
        guard let c = connection else { return }
        connection = nil
        _ = mg_websocket_client_write(c, Int32(MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE), nil, 0)
        mg_close_connection(c)
    }
}

private let wsClientData: mg_websocket_data_handler = { _, bits, data, length, user in
    guard let user else { return 0 }
    let client = Unmanaged<WebSocketTestClient>.fromOpaque(user).takeUnretainedValue()
    if (Int(bits) & 0x0F) == Int(MG_WEBSOCKET_OPCODE_TEXT), let data {
        client.received(String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self))
    }
    return 1
}

private let wsClientClose: mg_websocket_close_handler = { _, _ in }
