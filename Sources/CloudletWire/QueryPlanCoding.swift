import CloudletCore
import CloudletModel

/// A query plan (`explain`) on the wire: `{zones: [{zoneID, access, indexedFields, usesIndex, candidates,
/// recordsOfType, order, sortedInMemory}], notes, description}`.
public enum QueryPlanCoding {
    public static func write(_ plan: QueryPlan, to w: inout JSONWriter) {
        w.object { w in
            w.key("zones")
            w.array { w in
                for z in plan.zones {
                    w.object { w in
                        w.key("zoneID")
                        ZoneIDCoding.write(z.zoneID, to: &w)
                        w.member("access", z.access)
                        w.key("indexedFields")
                        w.array { w in for f in z.indexedFields { w.string(f) } }
                        w.member("usesIndex", z.usesIndex)
                        w.member("candidates", Int64(z.candidates))
                        w.member("recordsOfType", Int64(z.recordsOfType))
                        w.member("order", z.order)
                        w.member("sortedInMemory", z.sortedInMemory)
                    }
                }
            }
            w.key("notes")
            w.array { w in for n in plan.notes { w.string(n) } }
            w.member("description", plan.description)
        }
    }
}
