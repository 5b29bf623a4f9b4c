package taillab.jbb;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Random;
import java.util.TreeMap;

/**
 * The wholesale company of SPECjbb2005 (after TPC-C): warehouses with ten
 * districts each, customers per district, a catalogue of items, stock per
 * warehouse and item, orders with order lines, payment history.
 *
 * Records are plain Java objects held in collections, and every transaction
 * allocates (BigDecimal arithmetic, order objects, formatted result screens),
 * so the heap churns the way SPECjbb's does and the collector shows in the
 * latency tail.
 */
final class Company {
    static final int DISTRICTS = 10;
    static final int CUSTOMERS = 3000; // per district, as TPC-C and SPECjbb
    static final int ITEMS = 20000; // SPECjbb2005's item count
    static final int INITIAL_ORDERS = 300; // per district
    static final int INITIAL_NEW_ORDERS = 90; // the newest initial orders are undelivered
    /** Delivered orders kept per district; older ones are purged so the heap stays bounded. */
    static final int ORDER_WINDOW = 1000;
    static final int PAYMENTS_KEPT = 20; // per customer, for the customer report

    static final String[] SYLLABLES = {
        "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"
    };

    /** TPC-C last name of number n in [0, 999]. */
    static String lastName(int n) {
        return SYLLABLES[n / 100] + SYLLABLES[(n / 10) % 10] + SYLLABLES[n % 10];
    }

    static final class Item {
        final int id;
        final String name;
        final BigDecimal price;
        final String brand;

        Item(int id, String name, BigDecimal price, String brand) {
            this.id = id;
            this.name = name;
            this.price = price;
            this.brand = brand;
        }
    }

    static final class Stock {
        final int itemId;
        int quantity;
        int ytd;
        int orderCount;
        int remoteCount;
        final String[] distInfo = new String[DISTRICTS];

        Stock(int itemId, int quantity) {
            this.itemId = itemId;
            this.quantity = quantity;
        }
    }

    static final class History {
        final int customerId;
        final long date;
        final BigDecimal amount;
        final String data;

        History(int customerId, long date, BigDecimal amount, String data) {
            this.customerId = customerId;
            this.date = date;
            this.amount = amount;
            this.data = data;
        }
    }

    static final class Customer {
        final int id;
        final int warehouseId;
        final int districtId;
        final String first;
        final String last;
        final String credit; // "GC" or "BC"
        final BigDecimal creditLimit;
        final BigDecimal discount;
        BigDecimal balance = new BigDecimal("-10.00");
        BigDecimal ytdPayment = new BigDecimal("10.00");
        int paymentCount = 1;
        int deliveryCount;
        Order lastOrder;
        final ArrayDeque<History> payments = new ArrayDeque<>();
        String data;

        Customer(int id, int w, int d, String first, String last, String credit,
                 BigDecimal discount, String data) {
            this.id = id;
            this.warehouseId = w;
            this.districtId = d;
            this.first = first;
            this.last = last;
            this.credit = credit;
            this.creditLimit = new BigDecimal("50000.00");
            this.discount = discount;
            this.data = data;
        }
    }

    static final class OrderLine {
        final int itemId;
        final int supplyWarehouse;
        final int quantity;
        final BigDecimal amount;
        final String distInfo;
        long deliveryDate;

        OrderLine(int itemId, int supplyWarehouse, int quantity, BigDecimal amount, String distInfo) {
            this.itemId = itemId;
            this.supplyWarehouse = supplyWarehouse;
            this.quantity = quantity;
            this.amount = amount;
            this.distInfo = distInfo;
        }
    }

    static final class Order {
        final int id;
        final Customer customer;
        final long entryDate;
        final OrderLine[] lines;
        final BigDecimal total;
        int carrierId; // 0 until delivered
        boolean allLocal;

        Order(int id, Customer customer, long entryDate, OrderLine[] lines, BigDecimal total) {
            this.id = id;
            this.customer = customer;
            this.entryDate = entryDate;
            this.lines = lines;
            this.total = total;
        }
    }

    static final class District {
        final int id;
        final String name;
        final BigDecimal tax;
        BigDecimal ytd = new BigDecimal("30000.00");
        int nextOrderId = 1;
        final Customer[] customers = new Customer[CUSTOMERS];
        final HashMap<String, List<Customer>> byLastName = new HashMap<>();
        final TreeMap<Integer, Order> orders = new TreeMap<>();
        final ArrayDeque<Order> newOrders = new ArrayDeque<>();
        long purged; // delivered orders dropped from `orders`

        District(int id, BigDecimal tax) {
            this.id = id;
            this.name = "district-" + id;
            this.tax = tax;
        }
    }

    static final class Warehouse {
        final int id;
        final BigDecimal tax;
        BigDecimal ytd = new BigDecimal("300000.00");
        final District[] districts = new District[DISTRICTS];
        final Stock[] stock = new Stock[ITEMS];
        final ArrayDeque<History> history = new ArrayDeque<>();

        Warehouse(int id, BigDecimal tax) {
            this.id = id;
            this.tax = tax;
        }
    }

    final Item[] items = new Item[ITEMS];
    final Warehouse[] warehouses;
    /** Sum of every warehouse's ytd at load time, for the consistency check. */
    final BigDecimal initialYtd;
    final BigDecimal initialCustomerYtd;

    Company(int nWarehouses, long seed) {
        Random r = new Random(seed);
        for (int i = 0; i < ITEMS; i++) {
            BigDecimal price = BigDecimal.valueOf(100 + r.nextInt(9901), 2);
            items[i] = new Item(i + 1, "item-" + alnum(r, 14, 24), price, alnum(r, 8, 12));
        }
        warehouses = new Warehouse[nWarehouses];
        BigDecimal custYtd = BigDecimal.ZERO;
        for (int w = 0; w < nWarehouses; w++) {
            Warehouse wh = new Warehouse(w + 1, BigDecimal.valueOf(r.nextInt(2001), 4));
            for (int i = 0; i < ITEMS; i++) {
                Stock s = new Stock(i + 1, 10 + r.nextInt(91));
                for (int d = 0; d < DISTRICTS; d++) {
                    s.distInfo[d] = alnum(r, 24, 24);
                }
                wh.stock[i] = s;
            }
            for (int d = 0; d < DISTRICTS; d++) {
                District dist = new District(d + 1, BigDecimal.valueOf(r.nextInt(2001), 4));
                for (int c = 0; c < CUSTOMERS; c++) {
                    // TPC-C: the first 1000 customers carry every last name once,
                    // so a lookup by any name in [0, 999] finds someone.
                    int n = c < 1000 ? c : nuRand(r, 255, 0, 999);
                    Customer cu = new Customer(c + 1, w + 1, d + 1, alnum(r, 8, 16), lastName(n),
                        r.nextInt(10) == 0 ? "BC" : "GC", BigDecimal.valueOf(r.nextInt(5001), 4),
                        alnum(r, 100, 200));
                    dist.customers[c] = cu;
                    dist.byLastName.computeIfAbsent(cu.last, k -> new ArrayList<>()).add(cu);
                    custYtd = custYtd.add(cu.ytdPayment);
                }
                for (List<Customer> l : dist.byLastName.values()) {
                    l.sort(Comparator.comparing(c -> c.first));
                }
                for (int o = 0; o < INITIAL_ORDERS; o++) {
                    Customer cu = dist.customers[r.nextInt(CUSTOMERS)];
                    int nLines = 5 + r.nextInt(11);
                    OrderLine[] lines = new OrderLine[nLines];
                    BigDecimal total = BigDecimal.ZERO;
                    for (int l = 0; l < nLines; l++) {
                        BigDecimal amount = BigDecimal.valueOf(1 + r.nextInt(999999), 2);
                        lines[l] = new OrderLine(1 + r.nextInt(ITEMS), w + 1, 5, amount,
                            wh.stock[0].distInfo[d]);
                        total = total.add(amount);
                    }
                    Order ord = new Order(dist.nextOrderId++, cu, 0L, lines, total);
                    ord.allLocal = true;
                    dist.orders.put(ord.id, ord);
                    cu.lastOrder = ord;
                    if (o < INITIAL_ORDERS - INITIAL_NEW_ORDERS) {
                        ord.carrierId = 1 + r.nextInt(10);
                    } else {
                        dist.newOrders.addLast(ord);
                    }
                }
                wh.districts[d] = dist;
            }
            warehouses[w] = wh;
        }
        BigDecimal ytd = BigDecimal.ZERO;
        for (Warehouse wh : warehouses) {
            ytd = ytd.add(wh.ytd);
        }
        initialYtd = ytd;
        initialCustomerYtd = custYtd;
    }

    /** TPC-C's non-uniform random number NURand(A, x, y) with C = 0. */
    static int nuRand(Random r, int a, int x, int y) {
        return (((r.nextInt(a + 1) | (x + r.nextInt(y - x + 1)))) % (y - x + 1)) + x;
    }

    static String alnum(Random r, int min, int max) {
        int n = min + r.nextInt(max - min + 1);
        char[] c = new char[n];
        for (int i = 0; i < n; i++) {
            int k = r.nextInt(36);
            c[i] = (char) (k < 10 ? '0' + k : 'a' + k - 10);
        }
        return new String(c);
    }

    Warehouse warehouse(int id) {
        if (id < 1 || id > warehouses.length) {
            throw new IllegalArgumentException(
                "warehouse " + id + " does not exist (the company has " + warehouses.length + ")");
        }
        return warehouses[id - 1];
    }

    static District district(Warehouse w, int id) {
        if (id < 1 || id > DISTRICTS) {
            throw new IllegalArgumentException("district " + id + " is not in 1.." + DISTRICTS);
        }
        return w.districts[id - 1];
    }

    static Customer customer(District d, int id) {
        if (id < 1 || id > CUSTOMERS) {
            throw new IllegalArgumentException("customer " + id + " is not in 1.." + CUSTOMERS);
        }
        return d.customers[id - 1];
    }

    /** TPC-C lookup by last name: the customer in the middle of the first-name order. */
    static Customer customerByName(District d, String last) {
        List<Customer> l = d.byLastName.get(last);
        if (l == null || l.isEmpty()) {
            throw new IllegalArgumentException("no customer named " + last + " in district " + d.id);
        }
        return l.get((l.size() - 1) / 2);
    }

    static BigDecimal money(BigDecimal v) {
        return v.setScale(2, RoundingMode.HALF_UP);
    }
}
