import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// The spatial index's grid (``GeoCells``): a NEAR circle's covering must hold the cell of every location inside
/// the circle, at the level it chose. (Issue 13: a release build's covering lost the level and column bits of most
/// of its cells, so NEAR read cells no location is filed under. Run these in a release build too:
/// `make test-release`.)
@Suite struct IndexKeyTests {
    /// (level, column, row) of a cell id.
    static func parts(_ cell: UInt64) -> (level: Int, x: Int, y: Int) {
        (Int(cell >> 56), Int(cell >> 28 & (1 << 28 - 1)), Int(cell & (1 << 28 - 1)))
    }

    @Test(arguments: [1 as UInt64, 2, 3])
    func coveringHoldsTheCellOfEveryLocationWithinTheRadius(seed: UInt64) {
        var rng = SeededRandom(seed: seed)
        let special = [
            Location(latitude: 89.9, longitude: 0), Location(latitude: -89.9, longitude: 100),
            Location(latitude: 0.2, longitude: 179.99), Location(latitude: -10, longitude: -179.99),
            Location(latitude: 0, longitude: 0), Location(latitude: 37.7749, longitude: -122.4194),
        ]
        var checked = 0
        for i in 0..<300 {
            let center = i < special.count
                ? special[i]
                : Location(latitude: Double(rng.int(179_000)) / 1000 - 89.5, longitude: Double(rng.int(360_000)) / 1000 - 180)
            // Radii from 50 m to 20,000 km, spread evenly on a log scale.
            let km = 0.05 * pow(10, Double(rng.int(1000)) / 1000 * 5.6)
            let covering = GeoCells.covering(center, km: km)
            let levels = Set(covering.map { Self.parts($0).level })
            #expect(levels.count == 1 && GeoCells.levels.contains(levels.first!), "center \(center) radius \(km) km: levels \(levels)")
            let cells = Set(covering)
            for _ in 0..<20 {
                let d = km * Double(rng.int(1000)) / 1000
                let l = destination(from: center, km: d, bearing: Double(rng.int(3600)) / 10)
                guard Geo.distanceKilometres(l, center) <= km else { continue }
                checked += 1
                let found = !cells.isDisjoint(with: GeoCells.cells(l))
                #expect(found, "seed \(seed): \(l) is \(Geo.distanceKilometres(l, center)) km from \(center), radius \(km) km")
                if !found { return }
            }
        }
        #expect(checked > 5000)
    }

    /// The circle: 100 km around San Francisco is 8 columns × 7 rows of level-9 cells, each with its own id.
    @Test func coveringIsAFullRectangleOfDistinctCellsOfOneLevel() {
        let covering = GeoCells.covering(Location(latitude: 37.7749, longitude: -122.4194), km: 100)
        let parts = covering.map(Self.parts)
        #expect(Set(covering).count == covering.count)
        #expect(Set(parts.map(\.level)) == [9])
        let xs = Set(parts.map(\.x)), ys = Set(parts.map(\.y))
        #expect(covering.count == xs.count * ys.count)
        #expect(xs.max()! - xs.min()! + 1 == xs.count && ys.max()! - ys.min()! + 1 == ys.count)
        // Each location is filed under one cell per level, and its level-9 cell is in the covering.
        let here = GeoCells.cells(Location(latitude: 37.7749, longitude: -122.4194))
        #expect(here.map { Self.parts($0).level } == GeoCells.levels)
        #expect(covering.contains(here[2]))
    }

    /// The order a query sorted by distance visits cells in: a cell's lower bound never exceeds the distance to any
    /// location in it (else a nearer record could be read after a farther one), is 0 for a point inside, and is not
    /// vacuous (a bound of 0 everywhere would read every cell).
    @Test(arguments: [4 as UInt64, 5])
    func aCellsLowerBoundNeverExceedsTheDistanceToALocationInIt(seed: UInt64) {
        var rng = SeededRandom(seed: seed)
        func anywhere() -> Location {
            Location(latitude: Double(rng.int(180_000)) / 1000 - 90, longitude: Double(rng.int(360_000)) / 1000 - 180)
        }
        var informative = 0
        for i in 0..<3000 {
            // Half the points near the cell (the bound matters most there), half anywhere (poles, antimeridian).
            let inCell = anywhere()
            let level = GeoCells.levels[rng.int(GeoCells.levels.count)]
            let cell = GeoCells.cells(inCell)[GeoCells.levels.firstIndex(of: level)!]
            let box = GeoCells.box(cell)
            let point = i % 2 == 0
                ? anywhere()
                : destination(from: inCell, km: Double(rng.int(3_000_000)) / 1000 * GeoCells.size(level) / 10, bearing: Double(rng.int(3600)) / 10)
            let bound = GeoCells.lowerBoundKm(from: point, to: cell)
            var nearest = Double.infinity
            for _ in 0..<40 {
                let l = Location(
                    latitude: box.latitude.lowerBound + (box.latitude.upperBound - box.latitude.lowerBound) * Double(rng.int(1001)) / 1000,
                    longitude: box.longitude.lowerBound + (box.longitude.upperBound - box.longitude.lowerBound) * Double(rng.int(1001)) / 1000)
                nearest = min(nearest, Geo.distanceKilometres(point, l))
            }
            nearest = min(nearest, Geo.distanceKilometres(point, inCell))
            #expect(bound <= nearest, "seed \(seed): \(point) to cell \(box): bound \(bound) km, a location at \(nearest) km")
            if bound > nearest { return }
            if box.latitude.contains(point.latitude) && box.longitude.contains(point.longitude) {
                #expect(bound == 0, "\(point) lies in \(box), bound \(bound)")
            }
            if nearest > 50 && bound > nearest / 3 { informative += 1 }
        }
        #expect(informative > 500, "bounds within a factor 3 of the distance to a cell over 50 km away: \(informative)")
    }
}
