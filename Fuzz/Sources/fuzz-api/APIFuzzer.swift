import Cloudlet
import CloudletConcurrency
import CloudletCore
import CloudletWire
import Foundation
import FuzzSupport

@testable import CloudletServer

/// Every route's request decoding, through the server's router in process (no sockets): a store in a temp
/// directory, an API token, a signed-in user and an admin credential, made once per process. The first byte of
/// the input picks the route, the second the database and the credentials sent; the rest is the request body.
///
/// Invariants: no answer is a 5xx (bad input is a 4xx naming what is wrong); every answer that says it is JSON but a
/// redirect is a JSON object, and an error carries a `serverErrorCode` and a `reason`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAPI(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = Fuzz.bytes(data, count)
    guard input.count >= 2 else { return 0 }
    let fixture = APIFixture.shared
    let route = APIFixture.routes[Int(input[0]) % APIFixture.routes.count]
    let selector = input[1]
    let body = Array(input.dropFirst(2))

    let scope = ["public", "private", "shared"][Int(selector & 3) % 3]
    let path =
        Route.databaseOperations.contains(route)
        ? "/database/1/\(APIFixture.container)/development/\(scope)/\(route.rawValue)" : "/\(route.rawValue)"
    var query = "ckAPIToken=\(fixture.apiToken)"
    if selector & 4 == 0 { query += "&ckWebAuthToken=\(fixture.webAuthToken)" }
    var request = HTTPRequest(
        method: selector & 8 == 0 ? route.methods.last! : route.methods.first!, path: path, query: query, host: "127.0.0.1",
        body: body, remoteAddress: "127.0.0.1")
    if selector & 16 == 0 { request.authorization = "Bearer \(fixture.adminToken)" }

    let response = fixture.router.handle(request)
    let text = String(decoding: response.body, as: UTF8.self)
    Fuzz.require(response.status < 500, "\(route.rawValue) answered \(response.status): \(text)")
    // Pages, files and redirects (the console's) are not JSON.
    guard response.contentType.hasPrefix("application/json"), !(300..<400).contains(response.status) else { return 0 }
    let json: JSONValue
    do { json = try JSONParser.parse(response.body) } catch {
        fatalError("\(route.rawValue) answered \(response.status) with a body that is not JSON (\(error)): \(text)")
    }
    Fuzz.require(json.objectValue != nil, "\(route.rawValue) answered a JSON \(json.kindDescription), not an object")
    if response.status >= 400 {
        Fuzz.require(json["serverErrorCode"]?.stringValue != nil, "\(route.rawValue) error without serverErrorCode: \(text)")
        Fuzz.require(json["reason"]?.stringValue != nil, "\(route.rawValue) error without reason: \(text)")
    }
    return 0
}

/// The store and credentials the API fuzz target sends its requests to; removed when the process exits.
final class APIFixture: Sendable {
    static let container = "iCloud.com.example.fuzz"
    /// The routes fuzzed: all but the ones that would end the fixture's credentials for the inputs after them
    /// (refreshing or rotating the user's token, removing the user, revoking tokens and keys).
    static let routes: [Route] = Route.allCases.filter {
        ![.authRefresh, .adminUsersRemove, .adminUsersRotate, .adminTokensRevoke, .adminKeysRevoke, .unmatched].contains($0)
    }
    static let shared = APIFixture()

    let directory: String
    let store: CloudletStore
    let router: APIRouter
    let apiToken: String
    let webAuthToken: String
    let adminToken: String

    private init() {
        var template = Array((NSTemporaryDirectory() + "/cloudlet-fuzz-api-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { fatalError("mkdtemp: \(String(cString: strerror(errno)))") }
        let directory = String(cString: made)
        self.directory = directory
        do {
            let setup = try ThreadBridge.wait {
                let store = try await CloudletStore.open(
                    at: directory + "/store", configuration: StoreConfiguration(durability: .os))
                let credentials = Credentials(store: store)
                let api = try await credentials.createAPIToken(container: APIFixture.container)
                let user = try await credentials.createUser(name: "fuzz", email: "fuzz@example.com", discoverable: true)
                let admin = try await credentials.createAdminToken()
                return (store, api, user.webAuthToken, admin)
            }
            (store, apiToken, webAuthToken, adminToken) = setup
            var configuration = ServerConfiguration()
            configuration.port = 0
            router = try APIRouter(store: store, configuration: configuration)
        } catch {
            fatalError("the API fuzz target's store did not open: \(error)")
        }
        atexit { try? FileManager.default.removeItem(atPath: APIFixture.shared.directory) }
    }
}

/// The program's entry (see `Fuzz.main`).
@_cdecl("fuzz_api_main")
public func fuzzApiMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    Fuzz.main(argc, argv, fuzzAPI)
}
