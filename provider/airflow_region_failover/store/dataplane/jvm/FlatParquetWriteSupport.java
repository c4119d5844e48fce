package org.regionfailover.spark;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.reflect.Field;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.RecordWriter;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.parquet.column.ColumnDescriptor;
import org.apache.parquet.column.ColumnWriteStore;
import org.apache.parquet.column.ColumnWriter;
import org.apache.parquet.hadoop.ParquetOutputFormat;
import org.apache.parquet.io.api.Binary;
import org.apache.parquet.io.api.RecordConsumer;
import org.apache.parquet.schema.MessageType;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.datasources.DataSourceUtils;
import org.apache.spark.sql.execution.datasources.OutputWriter;
import org.apache.spark.sql.execution.datasources.parquet.ParquetWriteSupport;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import scala.Enumeration;
import scala.Function1;

/**
 * Spark's Parquet write support ({@code ParquetWriteSupport}: its schema, footer and value conversions) that hands
 * each value of a <em>flat</em> row straight to its column's writer. Spark's own {@code write} drives parquet-mr's
 * record consumer field by field (its per-level field markers, a closure per field, the consumer's null
 * bookkeeping): 12-18 % of a keyed write's JVM CPU for the ETL's rows ({@code benchmarks/bench_keyed_write.py},
 * {@code benchmarks/notes/}). For a row of top-level primitive columns the consumer's only effects are
 * {@code ColumnWriter.write(value, 0, maxDefinitionLevel)} per present value, {@code writeNull(0, 0)} per absent one
 * and {@code ColumnWriteStore.endRecord()} per row, so this class makes exactly those calls, with the values Spark's
 * writers compute (the same date and timestamp rebasing, the same decimal encodings): the same pages, row groups
 * and footer, byte for byte ({@code tests/integration/test_keyed_writer.py}).
 *
 * <p>Anything else is written by Spark's own {@code write}: a nested or other column type, the legacy format, INT96
 * or millisecond timestamps, a shredded variant, or a record consumer that is not parquet-mr's plain one (a
 * validating or logging consumer, another parquet-mr version without its column store field).
 */
public final class FlatParquetWriteSupport extends ParquetWriteSupport {
  private static final int BOOLEAN = 0, BYTE = 1, SHORT = 2, INT = 3, DATE = 4, LONG = 5, TIMESTAMP = 6,
      FLOAT = 7, DOUBLE = 8, STRING = 9, BINARY = 10, DECIMAL_INT = 11, DECIMAL_LONG = 12, DECIMAL_BYTES = 13;
  private static final Field COLUMNS = columnStoreField();
  private static final LongAdder FLAT_ROWS = new LongAdder();

  private final Function1<Object, Object> dateRebase;
  private final Function1<Object, Object> timestampRebase;
  private final byte[] decimalBuffer = new byte[16];
  private int[] kinds;  // per column, or null: Spark's own write
  private int[] precisions;
  private int[] scales;
  private MessageType messageType;
  private ColumnWriteStore store;  // null: Spark's own write
  private ColumnWriter[] writers;
  private int[] defined;
  private int[] lengths;
  private long rows;  // written column by column into this file

  public FlatParquetWriteSupport() {
    // as ParquetWriteSupport's own: the session's rebase mode, read where the writer is made
    Enumeration.Value mode = (Enumeration.Value) SQLConf.get().getConf(SQLConf.PARQUET_REBASE_MODE_IN_WRITE());
    dateRebase = DataSourceUtils.createDateRebaseFuncInWrite(mode, "Parquet");
    timestampRebase = DataSourceUtils.createTimestampRebaseFuncInWrite(mode, "Parquet");
  }

  /** Rows this JVM's writers have written column value by column value (for tests and benchmarks). */
  public static long flatRows() {
    return FLAT_ROWS.sum();
  }

  /** Whether rows of {@code schema} are written column value by column value under {@code conf}. */
  public static boolean writesFlat(StructType schema, Configuration conf) {
    return COLUMNS != null && kindsOf(schema, conf) != null;
  }

  /** One file's writer as Spark's {@code ParquetOutputWriter} makes it ({@code ParquetOutputFormat.getRecordWriter}
   * of the task's configuration and the file's path), with this write support. */
  public static OutputWriter open(String path, TaskAttemptContext context) throws IOException, InterruptedException {
    RecordWriter<Void, InternalRow> writer =
        new ParquetOutputFormat<InternalRow>(new FlatParquetWriteSupport()).getRecordWriter(context, new Path(path));
    return new OutputWriter() {
      @Override
      public void write(InternalRow row) {
        unchecked(path, () -> writer.write(null, row));
      }

      @Override
      public void close() {
        unchecked(path, () -> writer.close(context));
      }

      @Override
      public String path() {
        return path;
      }
    };
  }

  private interface FileAction {
    void run() throws IOException, InterruptedException;
  }

  /** Runs a file writer's call as Spark's Scala writer does, its checked exceptions unchecked. */
  private static void unchecked(String path, FileAction action) {
    try {
      action.run();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while writing " + path, e);
    }
  }

  @Override
  public WriteContext init(Configuration conf) {
    WriteContext context = super.init(conf);
    messageType = context.getSchema();
    StructType schema;
    try {  // Spark writes the schema as JSON (ParquetWriteSupport.setSchema); anything else: Spark's own write
      schema = (StructType) DataType.fromJson(conf.get(ParquetWriteSupport.SPARK_ROW_SCHEMA()));
    } catch (RuntimeException e) {
      return context;
    }
    kinds = COLUMNS == null ? null : kindsOf(schema, conf);
    if (kinds != null) {
      precisions = new int[kinds.length];
      scales = new int[kinds.length];
      for (int i = 0; i < kinds.length; i++) {
        if (schema.fields()[i].dataType() instanceof DecimalType decimal) {
          precisions[i] = decimal.precision();
          scales[i] = decimal.scale();
        }
      }
    }
    return context;
  }

  @Override
  public void prepareForWrite(RecordConsumer consumer) {
    super.prepareForWrite(consumer);
    store = null;
    if (kinds == null || consumer.getClass() != COLUMNS.getDeclaringClass()) {
      return;
    }
    List<ColumnDescriptor> leaves = messageType.getColumns();
    if (leaves.size() != kinds.length) {
      return;
    }
    ColumnWriteStore columns;
    try {
      columns = (ColumnWriteStore) COLUMNS.get(consumer);
    } catch (IllegalAccessException e) {
      return;
    }
    writers = new ColumnWriter[kinds.length];
    defined = new int[kinds.length];
    lengths = new int[kinds.length];
    for (int i = 0; i < kinds.length; i++) {
      ColumnDescriptor leaf = leaves.get(i);
      writers[i] = columns.getColumnWriter(leaf);
      defined[i] = leaf.getMaxDefinitionLevel();
      lengths[i] = leaf.getPrimitiveType().getTypeLength();
    }
    store = columns;
  }

  @Override
  public void write(InternalRow row) {
    if (store == null) {
      super.write(row);
      return;
    }
    for (int i = 0; i < kinds.length; i++) {
      ColumnWriter writer = writers[i];
      if (row.isNullAt(i)) {
        writer.writeNull(0, 0);
        continue;
      }
      int d = defined[i];
      switch (kinds[i]) {
        case BOOLEAN -> writer.write(row.getBoolean(i), 0, d);
        case BYTE -> writer.write((int) row.getByte(i), 0, d);
        case SHORT -> writer.write((int) row.getShort(i), 0, d);
        case INT -> writer.write(row.getInt(i), 0, d);
        case DATE -> writer.write(dateRebase.apply$mcII$sp(row.getInt(i)), 0, d);
        case LONG -> writer.write(row.getLong(i), 0, d);
        case TIMESTAMP -> writer.write(timestampRebase.apply$mcJJ$sp(row.getLong(i)), 0, d);
        case FLOAT -> writer.write(row.getFloat(i), 0, d);
        case DOUBLE -> writer.write(row.getDouble(i), 0, d);
        case STRING -> writer.write(Binary.fromReusedByteArray(row.getUTF8String(i).getBytes()), 0, d);
        case BINARY -> writer.write(Binary.fromReusedByteArray(row.getBinary(i)), 0, d);
        case DECIMAL_INT -> writer.write((int) row.getDecimal(i, precisions[i], scales[i]).toUnscaledLong(), 0, d);
        case DECIMAL_LONG -> writer.write(row.getDecimal(i, precisions[i], scales[i]).toUnscaledLong(), 0, d);
        default -> writer.write(decimalBytes(row, i), 0, d);
      }
    }
    store.endRecord();
    rows++;
  }

  @Override
  public FinalizedWriteContext finalizeWrite() {
    FLAT_ROWS.add(rows);
    rows = 0;
    return super.finalizeWrite();
  }

  /** A decimal of more than 18 digits as Spark writes it: its unscaled two's complement, sign-extended to the
   * column's fixed length. */
  private Binary decimalBytes(InternalRow row, int i) {
    int length = lengths[i];
    byte[] bytes = row.getDecimal(i, precisions[i], scales[i]).toJavaBigDecimal().unscaledValue().toByteArray();
    if (bytes.length == length) {
      return Binary.fromReusedByteArray(bytes, 0, length);
    }
    Arrays.fill(decimalBuffer, 0, length - bytes.length, bytes[0] < 0 ? (byte) -1 : (byte) 0);
    System.arraycopy(bytes, 0, decimalBuffer, length - bytes.length, bytes.length);
    return Binary.fromReusedByteArray(decimalBuffer, 0, length);
  }

  /** Each column's kind, or null when a column or a setting needs Spark's own write (class rule). */
  private static int[] kindsOf(StructType schema, Configuration conf) {
    if (Boolean.parseBoolean(conf.get(SQLConf.PARQUET_WRITE_LEGACY_FORMAT().key(), "false"))
        || conf.get(ParquetWriteSupport.SPARK_VARIANT_SHREDDING_SCHEMA()) != null) {
      return null;
    }
    boolean micros = "TIMESTAMP_MICROS".equals(conf.get(SQLConf.PARQUET_OUTPUT_TIMESTAMP_TYPE().key()));
    StructField[] fields = schema.fields();
    int[] kinds = new int[fields.length];
    for (int i = 0; i < fields.length; i++) {
      DataType type = fields[i].dataType();
      int kind = kindOf(type, micros);
      if (kind < 0) {
        return null;
      }
      kinds[i] = kind;
    }
    return kinds;
  }

  private static int kindOf(DataType type, boolean micros) {
    if (type instanceof BooleanType) return BOOLEAN;
    if (type instanceof ByteType) return BYTE;
    if (type instanceof ShortType) return SHORT;
    if (type instanceof IntegerType) return INT;
    if (type instanceof DateType) return DATE;
    if (type instanceof LongType || type instanceof TimestampNTZType) return LONG;
    if (type instanceof TimestampType) return micros ? TIMESTAMP : -1;
    if (type instanceof FloatType) return FLOAT;
    if (type instanceof DoubleType) return DOUBLE;
    if (type instanceof StringType) return STRING;
    if (type instanceof BinaryType) return BINARY;
    if (type instanceof DecimalType decimal) {
      return decimal.precision() <= 9 ? DECIMAL_INT : decimal.precision() <= 18 ? DECIMAL_LONG : DECIMAL_BYTES;
    }
    return -1;
  }

  /** parquet-mr's record consumer's column store, or null where this parquet-mr has no such field. */
  private static Field columnStoreField() {
    try {
      Class<?> consumer = Class.forName("org.apache.parquet.io.MessageColumnIO$MessageColumnIORecordConsumer");
      Field field = consumer.getDeclaredField("columns");
      if (!ColumnWriteStore.class.isAssignableFrom(field.getType())) {
        return null;
      }
      field.setAccessible(true);
      return field;
    } catch (ReflectiveOperationException | RuntimeException e) {
      return null;
    }
  }
}
