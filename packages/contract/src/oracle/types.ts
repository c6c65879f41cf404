/**
 * An oracle kernel: plain loops in f64. Every operand arrives decoded to a
 * Float64Array (inputs, and outputs with their current contents); the function
 * writes the outputs' logical elements in place and leaves every other element
 * (strided gaps) as it found it. Correctness only, never speed.
 */
export type OracleKernel<A> = (args: A, v: Record<string, Float64Array>) => void;
