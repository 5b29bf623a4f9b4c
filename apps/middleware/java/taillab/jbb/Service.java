package taillab.jbb;

import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryUsage;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLongArray;

import taillab.jbb.Company.Customer;
import taillab.jbb.Company.District;
import taillab.jbb.Company.History;
import taillab.jbb.Company.Order;
import taillab.jbb.Company.OrderLine;
import taillab.jbb.Company.Stock;
import taillab.jbb.Company.Warehouse;

/**
 * The entry points the Rust side calls through JNI: {@link #init}, {@link #handle},
 * {@link #check} and {@link #gcStats}. All are static so a worker thread needs
 * only the class, no object handle.
 *
 * A request is a little-endian record: u8 type, u16 warehouse, u8 district,
 * then the type's inputs (see {@code apps/middleware/src/lib.rs}). The response
 * is one status byte (0 ok, 1 rejected) followed by UTF-8 text: the
 * transaction's result screen, or why the request was rejected.
 *
 * Concurrency: a transaction holds the lock of the warehouse it runs in
 * (and, for a payment by a customer of another warehouse, that warehouse's
 * too, always taken in id order so two payments cannot deadlock); a stock
 * record is updated under its own lock because a new order may draw on a
 * remote warehouse's stock.
 */
public final class Service {
    static final int NEW_ORDER = 0, PAYMENT = 1, ORDER_STATUS = 2, DELIVERY = 3,
        STOCK_LEVEL = 4, CUSTOMER_REPORT = 5;
    static final String[] NAMES = {
        "new_order", "payment", "order_status", "delivery", "stock_level", "customer_report"
    };

    private static volatile Company company;
    private static final AtomicLongArray COUNTS = new AtomicLongArray(NAMES.length);

    private Service() {}

    /** Builds the company's data; called once before any request. */
    public static synchronized void init(int warehouses, long seed) {
        if (warehouses < 1) {
            throw new IllegalArgumentException("warehouses must be at least 1");
        }
        company = new Company(warehouses, seed);
    }

    /** Runs one transaction. Never throws: a bad request comes back as status 1. */
    public static byte[] handle(byte[] request) {
        try {
            String screen = run(ByteBuffer.wrap(request).order(ByteOrder.LITTLE_ENDIAN));
            return reply(0, screen);
        } catch (RuntimeException e) {
            return reply(1, e.toString());
        }
    }

    private static byte[] reply(int status, String text) {
        byte[] t = text.getBytes(StandardCharsets.UTF_8);
        byte[] out = new byte[t.length + 1];
        out[0] = (byte) status;
        System.arraycopy(t, 0, out, 1, t.length);
        return out;
    }

    private static String run(ByteBuffer b) {
        Company c = company;
        if (c == null) {
            throw new IllegalStateException("Service.init was not called");
        }
        if (b.remaining() < 4) {
            throw new IllegalArgumentException("request shorter than its 4-byte header");
        }
        int type = b.get() & 0xff;
        Warehouse w = c.warehouse(b.getShort() & 0xffff);
        District d = Company.district(w, b.get() & 0xff);
        String screen;
        switch (type) {
            case NEW_ORDER: screen = newOrder(c, w, d, b); break;
            case PAYMENT: screen = payment(c, w, d, b); break;
            case ORDER_STATUS: screen = orderStatus(w, d, b); break;
            case DELIVERY: screen = delivery(w, b.get() & 0xff); break;
            case STOCK_LEVEL: screen = stockLevel(w, d, b.get() & 0xff); break;
            case CUSTOMER_REPORT: screen = customerReport(w, d, b); break;
            default: throw new IllegalArgumentException("unknown transaction type " + type);
        }
        COUNTS.incrementAndGet(type);
        return screen;
    }

    /** A customer chosen by id (kind 0) or by TPC-C last-name number (kind 1). */
    private static Customer selectCustomer(District d, ByteBuffer b) {
        int kind = b.get() & 0xff;
        int v = b.getShort() & 0xffff;
        if (kind == 1) {
            if (v > 999) {
                throw new IllegalArgumentException("last-name number " + v + " is not in 0..999");
            }
            return Company.customerByName(d, Company.lastName(v));
        }
        return Company.customer(d, v);
    }

    private static String newOrder(Company c, Warehouse w, District d, ByteBuffer b) {
        int customerId = b.getShort() & 0xffff;
        int n = b.get() & 0xff;
        if (n < 1 || n > 15) {
            throw new IllegalArgumentException("a new order has 1..15 lines, not " + n);
        }
        int[] item = new int[n], supply = new int[n], qty = new int[n];
        for (int i = 0; i < n; i++) {
            item[i] = b.getShort() & 0xffff;
            supply[i] = b.getShort() & 0xffff;
            qty[i] = b.get() & 0xff;
            if (item[i] < 1 || item[i] > Company.ITEMS) {
                throw new IllegalArgumentException("item " + item[i] + " does not exist");
            }
            c.warehouse(supply[i]);
        }
        StringBuilder s = new StringBuilder(512);
        synchronized (w) {
            Customer cu = Company.customer(d, customerId);
            OrderLine[] lines = new OrderLine[n];
            BigDecimal total = BigDecimal.ZERO;
            boolean allLocal = true;
            for (int i = 0; i < n; i++) {
                Company.Item it = c.items[item[i] - 1];
                Warehouse sw = c.warehouses[supply[i] - 1];
                Stock st = sw.stock[item[i] - 1];
                int left;
                synchronized (st) {
                    // TPC-C restocking rule: never below 10 after an order.
                    st.quantity = st.quantity - qty[i] >= 10 ? st.quantity - qty[i]
                        : st.quantity - qty[i] + 91;
                    st.ytd += qty[i];
                    st.orderCount++;
                    if (sw != w) {
                        st.remoteCount++;
                        allLocal = false;
                    }
                    left = st.quantity;
                }
                BigDecimal amount = it.price.multiply(BigDecimal.valueOf(qty[i]));
                lines[i] = new OrderLine(it.id, sw.id, qty[i], amount, st.distInfo[d.id - 1]);
                total = total.add(amount);
                s.append(String.format("%5d %5d %-24s %3d %5d %8s %9s%n", sw.id, it.id, it.name,
                    qty[i], left, it.price, Company.money(amount)));
            }
            BigDecimal factor = BigDecimal.ONE.subtract(cu.discount)
                .multiply(BigDecimal.ONE.add(w.tax).add(d.tax));
            total = Company.money(total.multiply(factor));
            Order o = new Order(d.nextOrderId++, cu, System.currentTimeMillis(), lines, total);
            o.allLocal = allLocal;
            d.orders.put(o.id, o);
            d.newOrders.addLast(o);
            cu.lastOrder = o;
            return "NEW ORDER  warehouse " + w.id + " district " + d.id + " order " + o.id
                + "\ncustomer " + cu.id + " " + cu.last + " credit " + cu.credit + " discount "
                + cu.discount + "\n" + s + "total " + total + "\n";
        }
    }

    /** Runs `body` holding the locks of both warehouses, taken in id order. */
    private static String locked(Warehouse a, Warehouse b, java.util.function.Supplier<String> body) {
        Warehouse first = a.id <= b.id ? a : b, second = a.id <= b.id ? b : a;
        synchronized (first) {
            synchronized (second) {
                return body.get();
            }
        }
    }

    private static String payment(Company c, Warehouse w, District d, ByteBuffer b) {
        Warehouse cw = c.warehouse(b.getShort() & 0xffff);
        District cd = Company.district(cw, b.get() & 0xff);
        long cents = b.getInt() & 0xffffffffL;
        Customer cu = selectCustomer(cd, b);
        BigDecimal amount = BigDecimal.valueOf(cents, 2);
        return locked(w, cw, () -> {
            w.ytd = w.ytd.add(amount);
            d.ytd = d.ytd.add(amount);
            cu.balance = cu.balance.subtract(amount);
            cu.ytdPayment = cu.ytdPayment.add(amount);
            cu.paymentCount++;
            String data = w.id + " " + d.id + " " + cu.id + " " + cu.districtId + " " + amount;
            if (cu.credit.equals("BC")) {
                // TPC-C: bad-credit customers keep a rolling log in their record.
                String log = data + " | " + cu.data;
                cu.data = log.length() > 500 ? log.substring(0, 500) : log;
            }
            History h = new History(cu.id, System.currentTimeMillis(), amount, data);
            cu.payments.addLast(h);
            if (cu.payments.size() > Company.PAYMENTS_KEPT) {
                cu.payments.removeFirst();
            }
            w.history.addLast(h);
            if (w.history.size() > 1000) {
                w.history.removeFirst();
            }
            return "PAYMENT  warehouse " + w.id + " district " + d.id + "\ncustomer " + cu.id
                + " " + cu.first + " " + cu.last + " (" + cu.warehouseId + "/" + cu.districtId
                + ") credit " + cu.credit + "\namount " + amount + " balance "
                + Company.money(cu.balance) + "\n" + (cu.credit.equals("BC")
                    ? cu.data.substring(0, Math.min(200, cu.data.length())) + "\n" : "");
        });
    }

    private static String orderStatus(Warehouse w, District d, ByteBuffer b) {
        synchronized (w) {
            Customer cu = selectCustomer(d, b);
            StringBuilder s = new StringBuilder(256);
            s.append("ORDER STATUS  customer ").append(cu.id).append(' ').append(cu.last)
                .append(" balance ").append(Company.money(cu.balance)).append('\n');
            Order o = cu.lastOrder;
            if (o != null) {
                s.append("order ").append(o.id).append(" carrier ").append(o.carrierId)
                    .append('\n');
                for (OrderLine l : o.lines) {
                    s.append(String.format("%5d %5d %3d %9s %d%n", l.supplyWarehouse, l.itemId,
                        l.quantity, l.amount, l.deliveryDate));
                }
            }
            return s.toString();
        }
    }

    private static String delivery(Warehouse w, int carrier) {
        if (carrier < 1 || carrier > 10) {
            throw new IllegalArgumentException("carrier " + carrier + " is not in 1..10");
        }
        StringBuilder s = new StringBuilder(256);
        s.append("DELIVERY  warehouse ").append(w.id).append(" carrier ").append(carrier)
            .append('\n');
        synchronized (w) {
            long now = System.currentTimeMillis();
            for (District d : w.districts) {
                Order o = d.newOrders.pollFirst();
                if (o == null) {
                    s.append("district ").append(d.id).append(": nothing to deliver\n");
                    continue;
                }
                o.carrierId = carrier;
                for (OrderLine l : o.lines) {
                    l.deliveryDate = now;
                }
                Customer cu = o.customer;
                cu.balance = cu.balance.add(o.total);
                cu.deliveryCount++;
                s.append("district ").append(d.id).append(": order ").append(o.id)
                    .append(" total ").append(o.total).append('\n');
                // Keep the order table bounded; only delivered orders go.
                while (d.orders.size() > Company.ORDER_WINDOW + d.newOrders.size()) {
                    Map.Entry<Integer, Order> e = d.orders.firstEntry();
                    if (e.getValue().carrierId == 0) {
                        break;
                    }
                    d.orders.pollFirstEntry();
                    d.purged++;
                }
            }
        }
        return s.toString();
    }

    private static String stockLevel(Warehouse w, District d, int threshold) {
        if (threshold < 10 || threshold > 20) {
            throw new IllegalArgumentException("threshold " + threshold + " is not in 10..20");
        }
        synchronized (w) {
            HashSet<Integer> low = new HashSet<>();
            int seen = 0;
            for (Order o : d.orders.descendingMap().values()) {
                if (++seen > 20) {
                    break;
                }
                for (OrderLine l : o.lines) {
                    if (w.stock[l.itemId - 1].quantity < threshold) {
                        low.add(l.itemId);
                    }
                }
            }
            return "STOCK LEVEL  warehouse " + w.id + " district " + d.id + " threshold "
                + threshold + "\nlow stock: " + low.size() + "\n";
        }
    }

    private static String customerReport(Warehouse w, District d, ByteBuffer b) {
        synchronized (w) {
            Customer cu = selectCustomer(d, b);
            StringBuilder s = new StringBuilder(1024);
            s.append("CUSTOMER REPORT  ").append(cu.first).append(' ').append(cu.last)
                .append(" (").append(w.id).append('/').append(d.id).append('/').append(cu.id)
                .append(")\nbalance ").append(Company.money(cu.balance)).append(" ytd ")
                .append(cu.ytdPayment).append(" payments ").append(cu.paymentCount)
                .append(" deliveries ").append(cu.deliveryCount).append('\n');
            int shown = 0;
            Iterator<History> it = cu.payments.descendingIterator();
            while (it.hasNext() && shown < 5) {
                History h = it.next();
                s.append(String.format("payment %tF %10s%n", h.date, h.amount));
                shown++;
            }
            // The customer's recent orders: scan the district's newest orders.
            shown = 0;
            int scanned = 0;
            for (Order o : d.orders.descendingMap().values()) {
                if (++scanned > 200 || shown >= 5) {
                    break;
                }
                if (o.customer == cu) {
                    s.append(String.format("order %6d lines %2d total %10s carrier %2d%n", o.id,
                        o.lines.length, o.total, o.carrierId));
                    shown++;
                }
            }
            return s.toString();
        }
    }

    /**
     * Checks the company's invariants with every warehouse locked; returns ""
     * when all hold, else one line per violation.
     */
    public static String check() {
        Company c = company;
        if (c == null) {
            return "Service.init was not called";
        }
        return lockAll(c, 0);
    }

    private static String lockAll(Company c, int i) {
        if (i < c.warehouses.length) {
            synchronized (c.warehouses[i]) {
                return lockAll(c, i + 1);
            }
        }
        StringBuilder bad = new StringBuilder();
        BigDecimal ytd = BigDecimal.ZERO, paid = BigDecimal.ZERO;
        for (Warehouse w : c.warehouses) {
            BigDecimal dsum = BigDecimal.ZERO;
            for (District d : w.districts) {
                dsum = dsum.add(d.ytd.subtract(new BigDecimal("30000.00")));
                long created = d.nextOrderId - 1;
                if (created != d.orders.size() + d.purged) {
                    bad.append("w").append(w.id).append(" d").append(d.id)
                        .append(": next order id says ").append(created).append(" orders, table has ")
                        .append(d.orders.size()).append(" + ").append(d.purged).append(" purged\n");
                }
                long undelivered = d.orders.values().stream().filter(o -> o.carrierId == 0).count();
                if (undelivered != d.newOrders.size()) {
                    bad.append("w").append(w.id).append(" d").append(d.id).append(": ")
                        .append(undelivered).append(" undelivered orders but ")
                        .append(d.newOrders.size()).append(" in the new-order queue\n");
                }
                for (Order o : d.newOrders) {
                    if (d.orders.get(o.id) != o) {
                        bad.append("w").append(w.id).append(" d").append(d.id).append(": new order ")
                            .append(o.id).append(" missing from the order table\n");
                    }
                }
                for (Customer cu : d.customers) {
                    paid = paid.add(cu.ytdPayment);
                }
            }
            if (w.ytd.subtract(new BigDecimal("300000.00")).compareTo(dsum) != 0) {
                bad.append("w").append(w.id).append(": warehouse ytd ").append(w.ytd)
                    .append(" does not match its districts' payments ").append(dsum).append('\n');
            }
            ytd = ytd.add(w.ytd);
        }
        if (ytd.subtract(c.initialYtd).compareTo(paid.subtract(c.initialCustomerYtd)) != 0) {
            bad.append("payments received ").append(ytd.subtract(c.initialYtd))
                .append(" differ from payments made ").append(paid.subtract(c.initialCustomerYtd))
                .append('\n');
        }
        return bad.toString();
    }

    /** Collector counts and times, heap use and transaction counts, as JSON. */
    public static String gcStats() {
        StringBuilder s = new StringBuilder("{\"collectors\":[");
        boolean first = true;
        for (GarbageCollectorMXBean g : ManagementFactory.getGarbageCollectorMXBeans()) {
            s.append(first ? "" : ",").append("{\"name\":\"").append(g.getName())
                .append("\",\"count\":").append(g.getCollectionCount()).append(",\"time_ms\":")
                .append(g.getCollectionTime()).append('}');
            first = false;
        }
        MemoryUsage heap = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage();
        s.append("],\"heap_used\":").append(heap.getUsed()).append(",\"heap_max\":")
            .append(heap.getMax()).append(",\"transactions\":{");
        for (int i = 0; i < NAMES.length; i++) {
            s.append(i == 0 ? "" : ",").append('"').append(NAMES[i]).append("\":")
                .append(COUNTS.get(i));
        }
        return s.append("}}").toString();
    }
}
