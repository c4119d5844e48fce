package org.regionfailover.spark;

import java.io.IOException;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.TaskID;
import org.apache.hadoop.mapreduce.TaskType;
import org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.VoidFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.datasources.OutputWriter;
import org.apache.spark.sql.execution.datasources.OutputWriterFactory;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.sources.CreatableRelationProvider;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.CollectionAccumulator;
import org.apache.spark.util.SerializableConfiguration;
import scala.collection.immutable.Map;
import scala.reflect.ClassTag$;

/**
 * A keyed write: every row goes to the Parquet file of its subpartition, the int in its last column, which is not
 * written. Each Spark task keeps one of Spark's own Parquet writers ({@code ParquetFileFormat.prepareWrite}: the
 * same encoding, options and footer as {@code df.write.partitionBy(tag).parquet(path)}) per subpartition in an
 * array, and picks it by the row's tag: no projection, copy or hash lookup per row, as Spark's concurrent writer
 * does. Rows reach each file in the task's order, at most {@code maxRecordsPerFile} per file, so the same rows in
 * the same Spark partitions give the same files (named {@code <tag>=<j>/part-<task>-<token>-a<attempt>.c<n>.snappy.parquet}).
 * A task writes hidden files and renames them when it has closed every writer: a failed attempt leaves no part file.
 * No output-commit coordination guards the renames, so two attempts of one task can both publish (a speculative
 * copy, a zombie attempt of a resubmitted stage, an attempt whose executor died after it published), and with
 * other rows or another row order (a shuffle's input) their files differ in content and number: the names carry
 * the attempt, and the task attempt Spark counted (an action's accumulator update is applied once per task, from
 * the attempt whose success the scheduler took) is written to {@code <path>/_attempts} ({@code <task> <attempt>}
 * per line) when the job is done; the driver takes only that attempt's files of each task.
 */
public final class KeyedParquet implements CreatableRelationProvider {

  @Override
  public BaseRelation createRelation(SQLContext sqlContext, SaveMode mode, Map<String, String> options,
                                     Dataset<Row> data) {
    org.apache.spark.sql.classic.SparkSession spark =
        (org.apache.spark.sql.classic.SparkSession) sqlContext.sparkSession();
    String path = required(options, "path");
    int subpartitions = Integer.parseInt(required(options, "subpartitions"));
    long records = Long.parseLong(required(options, "maxRecordsPerFile"));
    String tagName = required(options, "tag");
    // the executed plan's schema, as Spark's own file writer takes it: optimisation may have proved a column
    // non-null (a folded constant) that the analysed schema still calls nullable, and the footer records which
    org.apache.spark.sql.execution.QueryExecution execution =
        ((org.apache.spark.sql.classic.Dataset<Row>) data).queryExecution();
    StructType full = execution.executedPlan().schema();
    int tag = full.length() - 1;
    if (tag < 0 || !full.fields()[tag].name().equals(tagName)) {
      throw new IllegalArgumentException("the keyed write's last column must be " + tagName + ", not " + full);
    }
    StructType schema = new StructType(Arrays.copyOf(full.fields(), tag, StructField[].class));
    try {
      Job job = Job.getInstance(spark.sessionState().newHadoopConfWithOptions(options));
      OutputWriterFactory factory = new ParquetFileFormat().prepareWrite(spark, job, options, schema);
      boolean flat = !options.get("flatWriter").contains("false")
          && FlatParquetWriteSupport.writesFlat(schema, job.getConfiguration());
      CollectionAccumulator<String> counted = spark.sparkContext().collectionAccumulator("keyed write attempts");
      Part part = new Part(new SerializableConfiguration(job.getConfiguration()), factory, flat, schema, path,
                           required(options, "token"), tagName, tag, subpartitions, records, counted);
      JavaRDD<InternalRow> rows = JavaRDD.fromRDD(execution.toRdd(), ClassTag$.MODULE$.apply(InternalRow.class));
      rows.foreachPartition(part);
      Path attempts = new Path(path, "_attempts");
      try (FSDataOutputStream out = attempts.getFileSystem(job.getConfiguration()).create(attempts, true)) {
        out.write(String.join("\n", counted.value()).getBytes(StandardCharsets.UTF_8));
      }
    } catch (IOException e) {
      throw new RuntimeException(e);
    }
    return new BaseRelation() {
      @Override public SQLContext sqlContext() { return sqlContext; }
      @Override public StructType schema() { return schema; }
    };
  }

  private static String required(Map<String, String> options, String name) {
    scala.Option<String> value = options.get(name);
    if (value.isEmpty()) {
      throw new IllegalArgumentException("the keyed Parquet write needs the option " + name);
    }
    return value.get();
  }

  /** One Spark task's write. */
  static final class Part implements VoidFunction<Iterator<InternalRow>>, Serializable {
    private final SerializableConfiguration conf;
    private final OutputWriterFactory factory;
    private final boolean flat;
    private final StructType schema;
    private final String path;
    private final String token;
    private final String tagName;
    private final int tag;
    private final int subpartitions;
    private final long records;
    private final CollectionAccumulator<String> counted;

    Part(SerializableConfiguration conf, OutputWriterFactory factory, boolean flat, StructType schema, String path,
         String token, String tagName, int tag, int subpartitions, long records,
         CollectionAccumulator<String> counted) {
      this.conf = conf;
      this.factory = factory;
      this.flat = flat;
      this.schema = schema;
      this.path = path;
      this.token = token;
      this.tagName = tagName;
      this.tag = tag;
      this.subpartitions = subpartitions;
      this.records = records;
      this.counted = counted;
    }

    @Override
    public void call(Iterator<InternalRow> rows) throws Exception {
      TaskContext task = TaskContext.get();
      int number = task.partitionId();
      TaskAttemptID id = new TaskAttemptID(new TaskID(new JobID(token, 0), TaskType.MAP, number),
                                           task.attemptNumber());
      TaskAttemptContext context = new TaskAttemptContextImpl(conf.value(), id);
      String extension = factory.getFileExtension(context);
      OutputWriter[] writers = new OutputWriter[subpartitions];
      long[] written = new long[subpartitions];
      int[] files = new int[subpartitions];
      List<String[]> renames = new ArrayList<>();
      boolean done = false;
      // the row without its tag: an UnsafeRow viewed as one field shorter (the tag is the last of its fixed-width
      // slots; valid while both widths need the same null-bit words), else Spark's projection of the other fields
      UnsafeRow view = new UnsafeRow(tag);
      boolean viewable = (tag + 1 + 63) / 64 == (tag + 63) / 64;
      UnsafeProjection project = null;
      try {
        while (rows.hasNext()) {
          InternalRow row = rows.next();
          if (row.isNullAt(tag)) {
            throw new IllegalStateException("a row without its " + tagName);
          }
          int j = row.getInt(tag);
          if (j < 0 || j >= subpartitions) {
            throw new IllegalStateException(tagName + " " + j + " is outside 0.." + (subpartitions - 1));
          }
          if (writers[j] == null || written[j] == records) {
            if (writers[j] != null) {
              writers[j].close();
              files[j]++;
            }
            String name = String.format("part-%05d-%s-a%d.c%03d%s", number, token, task.attemptNumber(), files[j],
                                        extension);
            String directory = path + "/" + tagName + "=" + j;
            String hidden = directory + "/." + name + "." + task.attemptNumber() + ".tmp";
            renames.add(new String[] {hidden, directory + "/" + name});
            writers[j] = flat ? FlatParquetWriteSupport.open(hidden, context)
                              : factory.newInstance(hidden, schema, context);
            written[j] = 0;
          }
          InternalRow data;
          if (viewable && row instanceof UnsafeRow) {
            UnsafeRow unsafe = (UnsafeRow) row;
            view.pointTo(unsafe.getBaseObject(), unsafe.getBaseOffset(), unsafe.getSizeInBytes());
            data = view;
          } else {
            if (project == null) {
              project = UnsafeProjection.create(schema);
            }
            data = project.apply(row);
          }
          writers[j].write(data);
          written[j]++;
        }
        for (int j = 0; j < subpartitions; j++) {
          if (writers[j] != null) {
            OutputWriter writer = writers[j];
            writers[j] = null;
            writer.close();
          }
        }
        done = true;
      } finally {
        if (!done) {
          for (OutputWriter writer : writers) {
            if (writer != null) {
              try {
                writer.close();
              } catch (Exception ignored) {
                // the attempt failed already; its hidden files are removed below
              }
            }
          }
        }
        publish(renames, done);
      }
      counted.add(number + " " + task.attemptNumber());  // reached only when every file of this attempt is published
    }

    private void publish(List<String[]> renames, boolean done) throws IOException {
      if (renames.isEmpty()) {
        return;
      }
      FileSystem fs = new Path(renames.get(0)[0]).getFileSystem(conf.value());
      for (String[] rename : renames) {
        Path hidden = new Path(rename[0]);
        if (!done || !fs.rename(hidden, new Path(rename[1]))) {
          fs.delete(hidden, false);  // a failed attempt, or another attempt published the same file first
        }
      }
    }
  }
}
